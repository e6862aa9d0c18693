#!/usr/bin/env python3
"""A misbehaving-on-request HTTP server for the model store's tests (Python's http.server).

Serves on 127.0.0.1 (port chosen by the OS) and prints one JSON line to stdout:
{"port": N, "files": {NAME: {"size": N, "sha256": HEX}}}. Paths:

  /files/NAME     the file, with Range support (206), ETag and Content-Length
  /drop/NAME      the first request without a Range header gets half the file, then the
                  connection closes; later requests behave like /files/NAME
  /slow/NAME      like /files/NAME, sent in 64 KiB pieces with 20 ms pauses
  /crawl/NAME     like /files/NAME, sent in 8 KiB pieces with 50 ms pauses (progress bars to watch)
  /stall/NAME     headers and 1000 bytes, then silence for 60 s
  /html/NAME      200 with an HTML sign-in page instead of the file
  /status/CODE    that status with a small HTML body
  /log            JSON list of every request so far: {"path", "range", "if_range"}

Files: model.zip (the shared detect.tflite and labelmap.txt, deflated), detect.tflite,
evil.zip (a "../escape.txt" entry), bomb.zip (64 MiB of zeros in one deflated entry),
corrupt.zip (model.zip with one byte flipped inside the deflated model),
video.mkv (a shared short clip).
Usage: http_server.py SHARED_DIR
"""
import hashlib, io, json, os, sys, threading, time, zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

shared = sys.argv[1]
model_dir = os.path.join(shared, "models", "coco-ssd-mobilenet-v1")
files = {}
with open(os.path.join(model_dir, "detect.tflite"), "rb") as f:
    files["detect.tflite"] = f.read()
with open(os.path.join(shared, "videos", "asl-walk.mkv"), "rb") as f:
    files["video.mkv"] = f.read()

def make_zip(entries):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            z.writestr(name, data)
    return buffer.getvalue()

with open(os.path.join(model_dir, "labelmap.txt"), "rb") as f:
    labels = f.read()
files["model.zip"] = make_zip([("detect.tflite", files["detect.tflite"]), ("labelmap.txt", labels)])
files["evil.zip"] = make_zip([("detect.tflite", files["detect.tflite"][:4096]), ("../escape.txt", b"escaped")])
files["bomb.zip"] = make_zip([("detect.tflite", b"\0" * (64 << 20))])
corrupt = bytearray(files["model.zip"])
corrupt[len(corrupt) // 3] ^= 0xFF
files["corrupt.zip"] = bytes(corrupt)

log, log_lock, dropped = [], threading.Lock(), set()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with log_lock:
            log.append({"path": self.path, "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range")})
        parts = self.path.strip("/").split("/")
        if parts == ["log"]:
            with log_lock:
                return self.reply(200, json.dumps(log).encode(), "application/json")
        if len(parts) != 2:
            return self.reply(404, b"<html><title>Not Found</title></html>", "text/html")
        mode, name = parts
        if mode == "status":
            return self.reply(int(name), b"<html><title>Error</title></html>", "text/html")
        data = files.get(name)
        if data is None:
            return self.reply(404, b"<html><title>Not Found</title></html>", "text/html")
        if mode == "html":
            return self.reply(200, b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Please sign in</body></html>", "text/html; charset=utf-8")
        etag = '"%s"' % hashlib.sha256(data).hexdigest()[:16]
        start, status = 0, 200
        range_header = self.headers.get("Range")
        if range_header and mode != "stall" and (self.headers.get("If-Range") in (None, etag)):
            start = int(range_header.split("=")[1].split("-")[0])
            if start >= len(data):
                return self.reply(416, b"", "text/plain", extra={"Content-Range": "bytes */%d" % len(data)})
            status = 206
        body = data[start:]
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.end_headers()
        try:
            if mode == "drop" and status == 200 and name not in dropped:
                dropped.add(name)
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            if mode == "stall":
                self.wfile.write(body[:1000])
                self.wfile.flush()
                time.sleep(60)
                return
            if mode in ("slow", "crawl"):
                piece, pause = (65536, 0.02) if mode == "slow" else (8192, 0.05)
                for offset in range(0, len(body), piece):
                    self.wfile.write(body[offset:offset + piece])
                    self.wfile.flush()
                    time.sleep(pause)
                return
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def reply(self, status, body, content_type, extra={}):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(json.dumps({"port": server.server_address[1],
                  "files": {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in files.items()}}),
      flush=True)
server.serve_forever()
