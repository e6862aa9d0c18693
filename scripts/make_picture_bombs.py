#!/usr/bin/env python3
"""Decompression bombs: tiny picture files whose headers announce 16000x16000 pixels (768 MiB of
RGB), the five shapes the security pass used against `spotter detect` and `serve`. Written to
fixtures-generated/bombs/ (not committed), with a small valid picture of each format beside them
(so a test can tell "refused for its size" from "refused for its format").

  bomb.gif        35 bytes: logical screen and one frame of 16000x16000
  bomb-rle8.bmp   about 1 KB: an 8-bit RLE bitmap, rows of "end of line"
  bomb.tiff       about 4 KB: one deflate strip of zeros
  bomb-cut.jpg    704 bytes: a JPEG whose frame header says 16000x16000, cut short
  bomb-zeros.png  about 250 KB: IHDR 16000x16000, IDAT of compressed zero rows
  ok.*            the same formats at 64x48, which decode
Tool versions: Python's zlib and struct; Pillow (see scripts/requirements-fixtures.txt) for the
small valid pictures and the JPEG before it is patched.
"""
import io
import os
import struct
import zlib

from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fixtures-generated", "bombs")
SIDE = 16000


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def gif():
    head = b"GIF89a" + struct.pack("<HHBBB", SIDE, SIDE, 0, 0, 0)
    frame = b"\x2c" + struct.pack("<HHHHB", 0, 0, SIDE, SIDE, 0) + b"\x02\x02\x4c\x01\x00"
    return head + frame + b"\x3b"


def bmp():
    rows = b"\x00\x00" * 480 + b"\x00\x01"  # end-of-line codes, then end of bitmap
    info = struct.pack("<IiiHHIIiiII", 40, SIDE, SIDE, 1, 8, 1, len(rows), 2835, 2835, 256, 0)
    palette = bytes(4 * 256)
    offset = 14 + len(info) + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset) + info + palette + rows


def tiff():
    strip = zlib.compress(bytes(SIDE), 9) * 1  # one row of zeros; the decoder expects 16000 of them
    entries = [(256, 4, 1, SIDE), (257, 4, 1, SIDE), (258, 3, 1, 8), (259, 3, 1, 8), (262, 3, 1, 1),
               (273, 4, 1, 0), (277, 3, 1, 1), (278, 4, 1, SIDE), (279, 4, 1, len(strip))]
    ifd_offset = 8
    data_offset = ifd_offset + 2 + 12 * len(entries) + 4
    body = struct.pack("<H", len(entries))
    for tag, kind, count, value in entries:
        if tag == 273:
            value = data_offset
        body += struct.pack("<HHI", tag, kind, count) + (struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value))
    body += struct.pack("<I", 0)
    data = b"II*\x00" + struct.pack("<I", ifd_offset) + body + strip
    return data + bytes(max(0, 4096 - len(data)))


def jpeg():
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (90, 120, 150)).save(buffer, "JPEG", quality=90)
    data = bytearray(buffer.getvalue())
    at = 2
    while at < len(data):
        marker, length = data[at + 1], struct.unpack(">H", data[at + 2:at + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            struct.pack_into(">HH", data, at + 5, SIDE, SIDE)
            break
        at += 2 + length
    return bytes(data[:704])


def png():
    compressor = zlib.compressobj(9)
    row = bytes(1 + SIDE)  # filter byte and a grey row
    idat = b"".join(compressor.compress(row) for _ in range(SIDE)) + compressor.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", SIDE, SIDE, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def main():
    os.makedirs(OUT, exist_ok=True)
    bombs = {"bomb.gif": gif(), "bomb-rle8.bmp": bmp(), "bomb.tiff": tiff(), "bomb-cut.jpg": jpeg(), "bomb-zeros.png": png()}
    for name, data in bombs.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    small = Image.new("RGB", (64, 48), (200, 80, 40))
    for ext, kind in [("gif", "GIF"), ("bmp", "BMP"), ("tiff", "TIFF"), ("jpg", "JPEG"), ("png", "PNG"), ("webp", "WEBP")]:
        small.save(os.path.join(OUT, f"ok.{ext}"), kind)
    print(f"wrote {len(bombs)} bombs and 6 small pictures to {OUT}")


if __name__ == "__main__":
    main()
