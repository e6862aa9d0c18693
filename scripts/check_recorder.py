#!/usr/bin/env python3
"""`spotter serve` and `spotter record` left in charge of cameras (issue 32), against the built
binary, with real streams: MPEG-TS over TCP from this script, a real RTSP camera (GStreamer's RTSP
server, Tests/Fixtures/rtsp_server.py, H.264 and H.265, TCP and UDP, a password), a real SQLite
lock (the sqlite3 program) and a real full disk (a small tmpfs, when this user may mount one).

  waiting     a --config camera whose stream starts 5 s later, and one added through the API while
              down, record within their next backoff step; SIGINT while connecting ends `record`
              within a second, SIGTERM ends `serve` as fast
  restart     a source added through the API (and a paused one) survive SIGTERM and a restart with
              the same ids, settings and clips
  stalls      a sender that stops mid-stream with its connection open: `record --timeout 3` ends
              with the clip indexed, `--reconnect` reconnects, and so does `serve`
  album       damaged indexes rebuilt with every clip, a clip whose file cannot be removed stays,
              a 32 s lock on the index delays a row without losing the clip, a read-only album is
              listed, `video` and `record` on a full disk leave nothing unplayable
  settings    serve --threshold 0.8 --classes person applies to both detect endpoints and new
              sources; unknown classes are a 400 naming the valid ones
  bodies      a declared body over the limit is 413 at once, Expect: 100-continue is answered
  time        clips carry started_at/ended_at; no number in the API or a webhook has more than 6
              decimals; URLs are absolute
  deepstack   min_confidence as a form field, {"success": false} errors, and Frigate's deepstack
              detector's own request (multipart image and api_key, 0.1 s timeout) read as it reads it
  rtsp        H.264 over TCP and H.265 over UDP record; the camera restarting comes back; a change
              of resolution; the password appears in no page, answer, event, log, webhook or clip
  smaller     detect on a rotated phone video, a rotated source's size, stale partial files,
              a taken port, negative numbers, help examples that fit 80 columns

Usage: check_recorder.py SPOTTER_BINARY
Prints one line per check and `N passed, M failed`.
"""
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

from checklib import MODEL, ROOT, SHARED, check, free_port, summary, surest_picture, wait_until

PEOPLE = os.path.join(SHARED, "videos", "one-by-one-person-detection.mp4")
WALK = os.path.join(SHARED, "videos", "asl-walk.mkv")
# A shared picture and LiteRT's detections on it (strongest first), and a class LiteRT finds
# nothing of there, so that a server set to it finds nothing on the picture.
PICTURE, LITERT = surest_picture()
TOP = LITERT[0]
ABSENT = next(c for c in ["toothbrush", "hair drier", "zebra", "giraffe", "person"] if c not in {d["label"] for d in LITERT})


def reports(labels, threshold, only=None):
    """Whether `labels` (strongest first) are LiteRT's above `threshold` (of class `only` if given):
    all those 0.03 or more above it first, then any within 0.03 of it."""
    litert = [d for d in LITERT if only is None or d["label"] == only]
    must = [d["label"] for d in litert if d["score"] >= threshold + 0.03]
    may = [d["label"] for d in litert if d["score"] >= threshold - 0.03]
    return labels[:len(must)] == must and all(label in may for label in labels)
PASSWORD = "hunter2-secret"


def request(port, method, path, body=None, headers=None, timeout=30):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body.encode() if isinstance(body, str) else body
    connection.request(method, path, body=data, headers=headers or {})
    response = connection.getresponse()
    result = (response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    connection.close()
    return result


def api(port, method, path, payload=None):
    status, _, body = request(port, method, path, None if payload is None else json.dumps(payload),
                              {"Content-Type": "application/json"} if payload is not None else {})
    return status, (json.loads(body) if body else None)


class TSSender:
    """MPEG-TS over TCP at the video's pace from 127.0.0.1:PORT; `stall_after` seconds into each
    connection it stops sending and keeps the connection open (a camera that lost power)."""

    def __init__(self, path, port=None, stall_after=None, loop=True):
        self.data = open(path, "rb").read()
        self.port = port or free_port()
        self.stall_after = stall_after
        self.loop = loop
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", self.port))
        self.server.listen(8)
        self.connections = 0
        self.closed = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self.send, args=(client,), daemon=True).start()

    def send(self, client):
        rate = len(self.data) / 40.0  # bytes a second, the files below are 40 s long
        start, sent = time.time(), 0
        try:
            while not self.closed:
                if self.stall_after is not None and time.time() - start > self.stall_after:
                    while not self.closed:
                        time.sleep(0.5)
                    return
                chunk = self.data[sent % len(self.data):sent % len(self.data) + int(rate * 0.1)] if self.loop else self.data[sent:sent + int(rate * 0.1)]
                if not chunk:
                    return
                client.sendall(chunk)
                sent += len(chunk)
                time.sleep(0.1)
        except OSError:
            pass
        finally:
            if self.stall_after is None or self.closed:
                client.close()

    def close(self):
        self.closed = True
        self.server.close()


class Server:
    def __init__(self, spotter, album, *extra, port=None, env=None):
        self.port = port or free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="spotter-serve-", suffix=".log", delete=False)
        self.process = subprocess.Popen([spotter, "serve", "--album", album, "--port", str(self.port), "--model", MODEL, *extra],
                                        stdout=self.log, stderr=subprocess.STDOUT, env=env)
        if not wait_until(lambda: request(self.port, "GET", "/health", timeout=1)[0] == 200, 40):
            raise RuntimeError("the server did not start: " + self.output())

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM):
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        return self.process.returncode

    def sources(self):
        return {s["id"]: s for s in api(self.port, "GET", "/api/v1/sources")[1]["sources"]}


def make_media(work):
    """40 s of the people video as MPEG-TS (H.264 and H.265), a stream that changes resolution, and
    a phone video rotated 90 degrees."""
    media = {}
    for codec, name in [("libx264", "h264"), ("libx265", "h265")]:
        media[name] = os.path.join(work, f"{name}.ts")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-ss", "20", "-i", PEOPLE, "-t", "40", "-c:v", codec, "-preset", "veryfast",
                        "-x265-params", "log-level=error", "-g", "15", "-an", "-f", "mpegts", media[name]], check=True)
    parts = []
    for index, size in enumerate(["768x432", "512x288"]):
        part = os.path.join(work, f"part{index}.ts")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-ss", str(20 + 10 * index), "-i", PEOPLE, "-t", "10", "-s", size, "-c:v", "libx264",
                        "-preset", "veryfast", "-g", "15", "-an", "-f", "mpegts", part], check=True)
        parts.append(part)
    media["resize"] = os.path.join(work, "resize.ts")
    with open(media["resize"], "wb") as out:
        for part in parts:
            out.write(open(part, "rb").read())
    # A phone video: the track's display matrix turns the stored 640x480 frames a quarter turn (the
    # matrix written into the MP4's tkhd box, as phones do; Debian's ffmpeg 5.1 has no option for it).
    media["rotated"] = os.path.join(work, "phone.mp4")
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", WALK, "-t", "2", "-c:v", "libx264", "-preset", "veryfast", "-an",
                    media["rotated"]], check=True)
    data = bytearray(open(media["rotated"], "rb").read())
    tkhd = data.find(b"tkhd")
    matrix = tkhd + 4 + 4 + (20 if data[tkhd + 4] == 0 else 32) + 16
    struct.pack_into(">9i", data, matrix, 0, 65536, 0, -65536, 0, 0, 0, 0, 1 << 30)
    open(media["rotated"], "wb").write(data)
    return media


def waiting_checks(spotter, work, media):
    camera_port, api_port = free_port(), free_port()
    config = os.path.join(work, "cameras.json")
    json.dump({"sources": [{"input": f"tcp://127.0.0.1:{camera_port}", "record": True}]}, open(config, "w"))
    album = os.path.join(work, "album-waiting")
    server = Server(spotter, album, "--config", config)
    try:
        down = wait_until(lambda: server.sources().get("c1", {}).get("state") == "waiting" and server.sources()["c1"], 10)
        check("a --config camera that is down waits (state waiting, with the reason and the next attempt)",
              down and "next attempt in" in down.get("message", ""), down)
        status, added = api(server.port, "POST", "/api/v1/sources", {"input": f"tcp://127.0.0.1:{api_port}", "record": True})
        check("a camera added through the API while down is accepted", status == 201, added)
        time.sleep(5)
        senders = [TSSender(media["h264"], port=camera_port), TSSender(media["h264"], port=api_port)]
        started = time.time()
        running = wait_until(lambda: all(s["state"] == "running" for s in server.sources().values()), 40)
        check(f"both start once their streams answer ({time.time() - started:.1f} s; the backoff is at most 30 s)", running,
              server.sources())
        recording = wait_until(lambda: all(s["recording"] or s["clips"] for s in server.sources().values()), 40)
        check("both record the people in view", recording, server.sources())
        start = time.time()
        code = server.stop()
        check(f"SIGTERM ends serve ({time.time() - start:.1f} s) with status 0", code == 0 and time.time() - start < 15, code)
        listed = subprocess.run([spotter, "album", "list", album], capture_output=True, text=True).stdout
        check("their clips are in the album", listed.count("tcp://127.0.0.1") >= 2, listed)
        for sender in senders:
            sender.close()
    finally:
        if server.process.poll() is None:
            server.stop()
    # SIGINT while connecting to nothing, and SIGTERM of a server whose source waits.
    silent = free_port()
    record = subprocess.Popen([spotter, "record", f"tcp://127.0.0.1:{silent}", "--album", os.path.join(work, "album-silent"), "--reconnect",
                               "--model", MODEL], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    start = time.time()
    record.send_signal(signal.SIGINT)
    try:
        record.wait(timeout=10)
    except subprocess.TimeoutExpired:
        record.kill()
    check(f"SIGINT while record waits for a silent camera ends it in {time.time() - start:.2f} s", time.time() - start < 1.0,
          record.stderr.read()[-300:])
    server = Server(spotter, os.path.join(work, "album-silent-serve"))
    api(server.port, "POST", "/api/v1/sources", {"input": f"tcp://127.0.0.1:{silent}"})
    time.sleep(2)
    start = time.time()
    server.stop()
    check(f"SIGTERM while a source waits ends serve in {time.time() - start:.2f} s", time.time() - start < 2.5)


def restart_checks(spotter, work, media):
    album = os.path.join(work, "album-restart")
    server = Server(spotter, album, "--media-dir", os.path.dirname(WALK))
    try:
        _, first = api(server.port, "POST", "/api/v1/sources", {"input": WALK, "record": True, "classes": ["person", TOP["label"]], "threshold": 0.45})
        _, second = api(server.port, "POST", "/api/v1/sources", {"input": WALK, "realtime": True, "loop": True, "record": False})
        status, paused = api(server.port, "PATCH", f"/api/v1/sources/{second['id']}", {"paused": True, "threshold": 0.7})
        check("PATCH pauses a source and changes its threshold", status == 200 and paused["state"] == "paused" and paused["threshold"] == 0.7,
              paused)
        wait_until(lambda: server.sources()[first["id"]]["state"] == "finished", 60)
        before = server.sources()
        clips_before = api(server.port, "GET", "/api/v1/album")[1]["clips"]
        server.stop()
    finally:
        if server.process.poll() is None:
            server.stop()
    server = Server(spotter, album, "--media-dir", os.path.dirname(WALK))
    try:
        after = server.sources()
        keep = ["id", "input", "record", "classes", "threshold", "realtime", "loop", "paused", "origin"]
        same = all({k: after.get(i, {}).get(k) for k in keep} == {k: before[i].get(k) for k in keep} for i in before)
        check("API sources come back after a restart with the same ids and settings, the paused one paused", same and
              after[second["id"]]["state"] == "paused", (before, after))
        clips_after = api(server.port, "GET", "/api/v1/album")[1]["clips"]
        check("and the same clips", [c["id"] for c in clips_after] == [c["id"] for c in clips_before] and clips_before, clips_after)
        # A file read to the end is a job done: neither the restart nor a change of settings reads it again.
        finished = before[first["id"]]
        time.sleep(4)
        again = server.sources()[first["id"]]
        check("the file read to the end before the restart stays finished, with its finished_at, and is not read again",
              finished.get("finished_at") and again["state"] == "finished" and again.get("finished_at") == finished["finished_at"]
              and again["frames"] == 0, (finished, again))
        status, patched = api(server.port, "PATCH", f"/api/v1/sources/{first['id']}", {"threshold": 0.6})
        time.sleep(4)
        clips_patched = api(server.port, "GET", "/api/v1/album")[1]["clips"]
        check("PATCH on a finished file keeps its new settings and does not read it again (no new clips)",
              status == 200 and patched["threshold"] == 0.6 and server.sources()[first["id"]]["state"] == "finished"
              and server.sources()[first["id"]]["frames"] == 0
              and [c["id"] for c in clips_patched] == [c["id"] for c in clips_before], (patched, len(clips_patched)))
        status, _ = api(server.port, "DELETE", f"/api/v1/sources/{second['id']}")
        server.stop()
        server = Server(spotter, album, "--media-dir", os.path.dirname(WALK))
        check("a removed source stays removed after a restart", second["id"] not in server.sources() and status == 204, server.sources())
    finally:
        server.stop()


def stall_checks(spotter, work, media):
    sender = TSSender(media["h264"], stall_after=12)
    album = os.path.join(work, "album-stall")
    start = time.time()
    done = subprocess.run([spotter, "record", f"tcp://127.0.0.1:{sender.port}", "--album", album, "--timeout", "3", "--model", MODEL,
                           "--classes", "person", "--threshold", "0.3"], capture_output=True, text=True, timeout=90)
    elapsed = time.time() - start
    listed = subprocess.run([spotter, "album", "list", album], capture_output=True, text=True).stdout
    check(f"record --timeout 3 on a stalled stream ends after {elapsed:.1f} s (12 s of video), saying so", elapsed < 25 and
          "no data for 3 s" in done.stderr, done.stderr[-300:])
    check("the clip open at the stall is finished and indexed", "person" in listed, listed + done.stderr[-300:])
    sender.close()
    sender = TSSender(media["h264"], stall_after=6)
    record = subprocess.Popen([spotter, "record", f"tcp://127.0.0.1:{sender.port}", "--album", os.path.join(work, "album-stall2"),
                               "--timeout", "3", "--reconnect", "--model", MODEL], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reconnected = wait_until(lambda: sender.connections >= 2, 30)
    record.send_signal(signal.SIGINT)
    out, err = record.communicate(timeout=30)
    check("record --reconnect reconnects to a stalled stream", reconnected and "reconnecting" in err, err[-300:])
    server = Server(spotter, os.path.join(work, "album-stall3"))
    try:
        api(server.port, "POST", "/api/v1/sources", {"input": f"tcp://127.0.0.1:{sender.port}", "record": False})
        states = []
        wait_until(lambda: states.append(server.sources()["s1"]["state"]) or sender.connections >= 4, 40)
        check("serve reconnects to a stalled stream", sender.connections >= 4 and "reconnecting" in states, states[-5:])
    finally:
        server.stop()
        sender.close()


def album_checks(spotter, work, media):
    album = os.path.join(work, "album-heal")
    for clip in (WALK, os.path.join(SHARED, "videos", "asl-again.mkv")):
        subprocess.run([spotter, "record", clip, "--album", album, "--model", MODEL], capture_output=True, check=True)
    listed = subprocess.run([spotter, "album", "list", album], capture_output=True, text=True).stdout
    for damage in ["garbage", "zeroed page", "truncated", "old schema"]:
        copy = os.path.join(work, "album-" + damage.replace(" ", "-"))
        shutil.copytree(album, copy)
        index = os.path.join(copy, "index.sqlite")
        if damage == "garbage":
            with open(index, "r+b") as f:
                f.write(b"G" * 100)
        elif damage == "zeroed page":
            with open(index, "r+b") as f:
                f.seek(4096)
                f.write(bytes(4096))
        elif damage == "truncated":
            os.truncate(index, 3000)
        else:
            db = sqlite3.connect(index)
            db.executescript("DROP TABLE clips; CREATE TABLE clips (id INTEGER PRIMARY KEY, path TEXT);")
            db.close()
        done = subprocess.run([spotter, "album", "list", copy], capture_output=True, text=True)
        kept = [n for n in os.listdir(copy) if n.startswith("index.sqlite.damaged-")]
        check(f"a {damage} index is kept aside and rebuilt with every clip", done.stdout == listed and kept and "damaged" in done.stderr,
              done.stdout + done.stderr)
    # A clip whose file cannot be removed (a folder in its place: unlink fails for root too).
    server = Server(spotter, album)
    try:
        clips = api(server.port, "GET", "/api/v1/album")[1]["clips"]
        path = os.path.join(album, "clips", clips[0]["url"].rsplit("/", 1)[1])
        moved = path + ".moved"
        os.rename(path, moved)
        os.makedirs(os.path.join(path, "x"))
        status, body = api(server.port, "DELETE", f"/api/v1/album/{clips[0]['id']}")
        check("deleting a clip whose file cannot be removed is refused and the clip stays", status == 409 and
              api(server.port, "GET", f"/api/v1/album/{clips[0]['id']}")[0] == 200, (status, body))
        shutil.rmtree(path)
        os.rename(moved, path)
        status, _ = api(server.port, "DELETE", f"/api/v1/album/{clips[1]['id']}")
    finally:
        server.stop()
    repaired = subprocess.run([spotter, "album", "repair", album], capture_output=True, text=True).stdout
    remaining = subprocess.run([spotter, "album", "list", album], capture_output=True, text=True).stdout
    check("a deleted clip never comes back at the next repair", status == 204 and remaining.count("clips/") == 1, repaired + remaining)
    # A lock held past the index's 30 s busy timeout while clips end: a live stream of people (40 s
    # at its own pace), the index locked by another program from 3 s to 38 s.
    locked = os.path.join(work, "album-locked")
    sender = TSSender(media["h264"], loop=False)
    record = subprocess.Popen([spotter, "record", f"tcp://127.0.0.1:{sender.port}", "--album", locked, "--model", MODEL, "--post-roll", "1",
                               "--timeout", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    holder = subprocess.Popen(["sqlite3", os.path.join(locked, "index.sqlite")], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    holder.stdin.write("BEGIN EXCLUSIVE; SELECT count(*) FROM clips;\n")
    holder.stdin.flush()
    time.sleep(35)
    holder.stdin.write("COMMIT;\n.quit\n")
    holder.stdin.flush()
    holder.wait(timeout=10)
    out, err = record.communicate(timeout=120)
    sender.close()
    names = sorted(n for n in os.listdir(os.path.join(locked, "clips")) if n.endswith(".mp4"))
    entries = [json.loads(r) for r in subprocess.run([spotter, "album", "list", locked, "--json"], capture_output=True, text=True).stdout.splitlines()]
    rows = sorted(e["clip"].split("/")[1] for e in entries)
    check(f"clips finished under a 35 s lock are all indexed once it is gone ({len(rows)} rows for {len(names)} clips), with labels",
          names and rows == names and all("person" in e["labels"] for e in entries) and "no clip" not in err, (names, entries, err[-400:]))
    # Read-only media and a full disk, where this user may mount a tmpfs.
    mount = os.path.join(work, "small")
    os.makedirs(mount)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mount], capture_output=True).returncode != 0:
        print("note  read-only and full-disk checks skipped: this user cannot mount a tmpfs")
        return
    try:
        done = subprocess.run([spotter, "video", PEOPLE, "--output", os.path.join(mount, "out.mp4"), "--model", MODEL],
                              capture_output=True, text=True, timeout=300)
        check("video on a full disk leaves nothing under the output name and says the partial was removed",
              done.returncode != 0 and not os.listdir(mount) and "removed" in done.stderr, (os.listdir(mount), done.stderr[-300:]))
        done = subprocess.run([spotter, "record", PEOPLE, "--album", os.path.join(mount, "album"), "--model", MODEL, "--threshold", "0.3"],
                              capture_output=True, text=True, timeout=300)
        clips = [n for n in os.listdir(os.path.join(mount, "album", "clips")) if n.endswith(".mp4")]
        rows = subprocess.run(["sqlite3", os.path.join(mount, "album", "index.sqlite"), "select clip from clips"], capture_output=True,
                              text=True).stdout.split()
        unindexed = [c for c in clips if f"clips/{c}" not in rows]
        check("record on a full disk says which clips are on disk without a row",
              done.returncode != 0 and (not unindexed or "album repair" in done.stderr), (clips, rows, done.stderr[-300:]))
        subprocess.run(["umount", mount], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mount], check=True)
        subprocess.run([spotter, "record", WALK, "--album", os.path.join(mount, "ro"), "--model", MODEL], capture_output=True, check=True)
        subprocess.run(["mount", "-o", "remount,ro", mount], check=True)
        done = subprocess.run([spotter, "album", "list", os.path.join(mount, "ro")], capture_output=True, text=True)
        check("a read-only album is listed", done.returncode == 0 and "person" in done.stdout, done.stderr[-300:])
    finally:
        subprocess.run(["umount", mount], capture_output=True)


def settings_checks(spotter, work):
    done = subprocess.run([spotter, "serve", "--album", os.path.join(work, "never"), "--port", str(free_port()), "--model", MODEL,
                           "--classes", "persn"], capture_output=True, text=True, timeout=60)
    check("serve --classes persn is refused, naming the valid classes", done.returncode != 0 and "person" in done.stderr, done.stderr[-200:])
    server = Server(spotter, os.path.join(work, "album-settings"), "--threshold", "0.8", "--classes", ABSENT)
    try:
        picture = open(PICTURE, "rb").read()
        _, _, body = request(server.port, "POST", "/api/v1/detect", picture)
        check(f"--threshold 0.8 --classes {ABSENT}: /api/v1/detect finds nothing on {os.path.basename(PICTURE)}",
              json.loads(body)["detections"] == [], body)
        _, _, body = request(server.port, "POST", "/v1/vision/detection", picture)
        check("and DeepStack's endpoint neither", json.loads(body)["predictions"] == [], body)
        _, _, body = request(server.port, "POST", f"/api/v1/detect?threshold=0.5&classes={urllib.parse.quote(TOP['label'])}", picture)
        got = [d["label"] for d in json.loads(body)["detections"]]
        check(f"a request may ask for other settings ({TOP['label']} at 0.5: LiteRT's)",
              got and reports(got, 0.5, only=TOP["label"]), body)
        status, answer = api(server.port, "POST", "/api/v1/sources", {"input": "rtsp://127.0.0.1:9/cam", "record": False})
        check("new sources take the server's threshold and classes", status == 201 and answer["threshold"] == 0.8 and answer["classes"] == [ABSENT],
              answer)
        for path in ["/api/v1/detect?classes=persn", "/v1/vision/detection?classes=persn"]:
            status, _, body = request(server.port, "POST", path, picture)
            check(f"{path.split('?')[0]} refuses an unknown class with 400 naming the valid ones", status == 400 and b"person" in body, body[:200])
        status, answer = api(server.port, "POST", "/api/v1/sources", {"input": "rtsp://127.0.0.1:9/cam", "classes": ["persn"]})
        check("a source with an unknown class is refused with 400", status == 400 and "persn" in answer["error"]["message"], answer)
    finally:
        server.stop()


def multipart(fields, boundary="spotter-boundary"):
    """A multipart/form-data body as Python's requests writes it (files by field name)."""
    parts = []
    for name, value, filename in fields:
        head = f'Content-Disposition: form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        parts.append(f"--{boundary}\r\n{head}\r\n\r\n".encode() + (value if isinstance(value, bytes) else value.encode()) + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def body_time_deepstack_checks(spotter, work):
    hook_bodies = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            hook_bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    token = "a-long-enough-token-42"
    server = Server(spotter, os.path.join(work, "album-time"), "--media-dir", os.path.dirname(WALK), "--token", token,
                    "--public-url", "https://cams.example.com", "--webhook", f"http://127.0.0.1:{hook.server_address[1]}/hook")
    auth = {"Authorization": f"Bearer {token}"}
    try:
        s = socket.create_connection(("127.0.0.1", server.port))
        start = time.time()
        s.sendall(b"POST /api/v1/uploads HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999\r\n\r\nabcd")
        s.settimeout(5)
        answer = s.recv(200)
        check(f"a declared body over the limit is 413 at once ({time.time() - start:.2f} s)", answer.startswith(b"HTTP/1.1 413"), answer)
        s.close()
        s = socket.create_connection(("127.0.0.1", server.port))
        picture = open(PICTURE, "rb").read()
        s.sendall(f"POST /api/v1/detect HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nContent-Length: {len(picture)}\r\n"
                  "Expect: 100-continue\r\n\r\n".encode())
        s.settimeout(5)
        interim = s.recv(100)
        s.sendall(picture)
        final = s.recv(300)
        check("Expect: 100-continue is answered, then the picture is detected", interim.startswith(b"HTTP/1.1 100") and b" 200 " in final,
              interim + final[:100])
        s.close()
        # A clip, its times and URLs, in the API and the webhook.
        status, _, body = request(server.port, "POST", "/api/v1/sources", json.dumps({"input": WALK}),
                                  {"Content-Type": "application/json", **auth})
        wait_until(lambda: [b for b in hook_bodies if json.loads(b)["type"] == "clip_finished"], 60)
        _, _, body = request(server.port, "GET", "/api/v1/album", headers=auth)
        clip = json.loads(body)["clips"][0]
        iso = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$"
        check("a clip carries started_at and ended_at (ISO 8601 with offset, ms)", re.match(iso, clip.get("started_at") or "") and
              re.match(iso, clip.get("ended_at") or "") and clip["started_at"] <= clip["ended_at"], clip)
        check("the API's URLs are absolute (--public-url)", clip["url"].startswith("https://cams.example.com/media/clips/"), clip["url"])
        webhook = next((json.loads(b) for b in hook_bodies if json.loads(b)["type"] == "clip_finished"), {"clip": {"url": ""}})
        check("the webhook's URLs are absolute", webhook["clip"]["url"].startswith("https://cams.example.com/media/clips/"), webhook)
        numbers = re.findall(rb"-?\d+\.(\d+)", body + b"".join(hook_bodies) + request(server.port, "GET", "/api/v1/sources", headers=auth)[2])
        longest = max((len(n) for n in numbers), default=0)
        check(f"no number in the album, sources or webhook has more than 6 decimals (longest {longest})", longest <= 6)
        # DeepStack as its clients call it.
        # A minimum confidence just under the top detection's (at least 0.5): LiteRT's labels above it.
        least = round(max(0.5, TOP["score"] - 0.05), 2)
        form, content_type = multipart([("image", picture, "image"), ("min_confidence", str(least), None), ("api_key", token, None)])
        status, _, body = request(server.port, "POST", "/v1/vision/detection", form, {"Content-Type": content_type})
        answer = json.loads(body)
        check(f"DeepStack: api_key and min_confidence ({least}) as form fields are honoured", status == 200 and
              reports([p["label"] for p in answer["predictions"]], least), body)
        status, _, body = request(server.port, "POST", "/v1/vision/detection", b"not a picture", auth)
        answer = json.loads(body)
        check("DeepStack: errors are {success: false, error}", status >= 400 and answer.get("success") is False and answer.get("error"), body)
        frigate = frigate_detect(server.port, token, picture)
        check(f"Frigate's deepstack detector reads the answer within its 0.1 s timeout: {frigate}",
              frigate and frigate[0][0] == TOP["label"] and frigate[0][1] >= 0.4, frigate)
    finally:
        server.stop()
        hook.shutdown()


def frigate_detect(port, token, picture):
    """What Frigate's deepstack plugin (frigate/detectors/plugins/deepstack.py) does with a frame:
    POST the JPEG as the multipart file `image` with `api_key`, time out after 0.1 s, and read up to
    20 predictions in order, stopping at the first below 0.4 or with a label not in its labelmap."""
    import cv2
    import numpy as np
    frame = cv2.resize(cv2.imread(PICTURE), (320, 320))
    jpeg = cv2.imencode(".jpg", frame)[1].tobytes()
    body, content_type = multipart([("api_key", token, None), ("image", jpeg, "image")])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=0.1)
    connection.request("POST", "/v1/vision/detection", body=body, headers={"Content-Type": content_type})
    predictions = json.loads(connection.getresponse().read()).get("predictions")
    # Frigate's label map is COCO's, as the model's.
    with open(os.path.join(os.path.dirname(MODEL), "labelmap.txt")) as f:
        labels = [label for label in f.read().splitlines()[1:] if label != "???"]
    detections = np.zeros((20, 6), np.float32)
    found = []
    for i, detection in enumerate(predictions):
        if detection["confidence"] < 0.4 or detection["label"].lower() not in labels:
            break
        detections[i] = [labels.index(detection["label"]), detection["confidence"], detection["y_min"] / 320, detection["x_min"] / 320,
                         detection["y_max"] / 320, detection["x_max"] / 320]
        found.append((detection["label"], detection["confidence"]))
    return found


def rtsp_checks(spotter, work, media):
    port = free_port()
    fixture = os.path.join(ROOT, "Tests", "Fixtures", "rtsp_server.py")
    camera_log = os.path.join(work, "rtsp-camera.log")

    def camera(codec, path):
        # The camera's messages go to a file: a pipe nobody reads could fill and stall it. A camera
        # that says ready but takes no connection (seen twice in full test runs, never alone) is
        # started again, saying so.
        for attempt in range(3):
            log = open(camera_log, "a")
            process = subprocess.Popen(["/usr/bin/python3", fixture, "--port", str(port), "--file", path, "--codec", codec, "--user", "admin",
                                        "--password", PASSWORD], stdout=subprocess.PIPE, stderr=log, text=True)
            log.close()
            line = process.stdout.readline()
            if line.startswith("ready") and accepts(port):
                return process
            print(f"      the RTSP camera fixture did not take connections (attempt {attempt + 1}): {line.strip()!r}, "
                  f"{'running' if process.poll() is None else f'exited with {process.returncode}'}; "
                  f"its log ends: {open(camera_log).read()[-600:]!r}", flush=True)
            process.kill()
            process.wait()
        raise RuntimeError("the RTSP camera fixture did not start: " + open(camera_log).read()[-2000:])

    def accepts(port, seconds=5):
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.2)
        return False

    def camera_state(process):
        alive = "running" if process.poll() is None else f"exited with {process.returncode}"
        return f"camera {alive}; its log ends: {open(camera_log).read()[-1000:]!r}"

    url = f"rtsp://admin:{PASSWORD}@127.0.0.1:{port}/cam"
    hook_bodies = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            hook_bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    album = os.path.join(work, "album-rtsp")
    cam = camera("h264", media["h264"])
    server = Server(spotter, album, "--webhook", f"http://127.0.0.1:{hook.server_address[1]}/hook")
    events = []

    def follow():
        try:
            stream = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/v1/events", timeout=120)
            for line in stream:
                events.append(line)
        except Exception:
            pass

    threading.Thread(target=follow, daemon=True).start()
    try:
        # One client after the other: GStreamer's shared media, set up for a TCP and a UDP client in
        # the same moment, once served neither (the fixture listening, its log empty).
        status, tcp = api(server.port, "POST", "/api/v1/sources", {"input": url, "record": True})
        wait_until(lambda: server.sources()[tcp["id"]]["frames"] > 0, 20)
        status2, udp = api(server.port, "POST", "/api/v1/sources", {"input": url, "record": False, "rtsp_transport": "udp"})
        running = wait_until(lambda: all(server.sources()[s["id"]]["frames"] > 20 for s in (tcp, udp)), 40)
        if not running:
            print(f"      the RTSP camera after 40 s: {camera_state(cam)}, takes connections: {accepts(port, 1)}; sources: "
                  f"{[(s['id'], s['state'], s.get('message')) for s in server.sources().values()]}", flush=True)
            # The fixture died, stopped listening or serves nothing: a camera that comes back must be picked up.
            cam.kill()
            cam.wait()
            cam = camera("h264", media["h264"])
            running = wait_until(lambda: all(server.sources()[s["id"]]["frames"] > 20 for s in (tcp, udp)), 45)
            print(f"      after starting the camera fixture again: {'streaming' if running else 'still not streaming'}", flush=True)
        check("an RTSP camera with a password streams over TCP and over UDP", running and server.sources()[udp["id"]]["rtsp_transport"] == "udp",
              f"{camera_state(cam)}; {server.sources()}")
        cam.kill()
        cam.wait()
        wait_until(lambda: server.sources()[tcp["id"]]["state"] in ("reconnecting", "waiting"), 30)
        frames = server.sources()[tcp["id"]]["frames"]
        cam = camera("h264", media["h264"])
        back = wait_until(lambda: server.sources()[tcp["id"]]["frames"] > frames + 20, 60)
        check("it comes back after the RTSP server restarts", back, server.sources()[tcp["id"]])
        clip_posts = lambda: [b for b in hook_bodies if json.loads(b)["type"] == "clip_finished"]
        wait_until(clip_posts, 60)
        check("its clip was posted to the webhook", clip_posts(), len(hook_bodies))
        everything = [server.output().encode(), json.dumps(server.sources()).encode(), *events, *hook_bodies,
                      request(server.port, "GET", "/api/v1/album")[2], request(server.port, "GET", "/live")[2]]
        for clip in os.listdir(os.path.join(album, "clips")):
            everything.append(open(os.path.join(album, "clips", clip), "rb").read())
        everything.append(open(os.path.join(album, "index.sqlite"), "rb").read())
        leaks = [i for i, text in enumerate(everything) if PASSWORD.encode() in text]
        check(f"the password appears nowhere (log, API, {len(events)} event lines, webhooks, pages, clips, index)", not leaks and events, leaks)
        check("the API shows the camera as rtsp://admin:***@...", server.sources()[tcp["id"]]["input"] == url.replace(PASSWORD, "***"),
              server.sources()[tcp["id"]]["input"])
    finally:
        server.stop()
        cam.kill()
    for codec, path, transport in [("h265", media["h265"], "udp"), ("h264", media["resize"], "tcp")]:
        cam = camera(codec, path)
        try:
            done = subprocess.run([spotter, "record", url.replace("rtsp://", "rtsp://"), "--album", os.path.join(work, f"album-{codec}-{transport}"),
                                   "--model", MODEL, "--timeout", "4"], capture_output=True, text=True, timeout=90)
            listed = subprocess.run([spotter, "album", "list", os.path.join(work, f"album-{codec}-{transport}")], capture_output=True, text=True).stdout
            what = "H.265" if codec == "h265" else "a stream that changes resolution"
            check(f"record on an RTSP camera of {what} records its people", "person" in listed and PASSWORD not in done.stderr + listed,
                  done.stderr[-300:] + listed)
        finally:
            cam.kill()
    hook.shutdown()


def smaller_checks(spotter, work, media):
    done = subprocess.run([spotter, "detect", media["rotated"], "--model", MODEL, "--json"], capture_output=True, text=True)
    first = json.loads(done.stdout.splitlines()[0]) if done.returncode == 0 and done.stdout else {}
    check("detect on a phone video rotated 90 degrees sees it upright", first.get("width", 0) < first.get("height", 0), done.stdout[:200])
    server = Server(spotter, os.path.join(work, "album-small"), "--media-dir", work)
    try:
        _, source = api(server.port, "POST", "/api/v1/sources", {"input": media["rotated"], "record": False})
        status = wait_until(lambda: server.sources()[source["id"]].get("width") and server.sources()[source["id"]], 20)
        check("a rotated video's source reports its upright size", status and status["width"] < status["height"], status)
        taken = subprocess.run([spotter, "serve", "--album", os.path.join(work, "album-taken"), "--port", str(server.port), "--model", MODEL],
                               capture_output=True, text=True, timeout=60)
        check("a taken port is an error, without 'serving' first", taken.returncode != 0 and "serving" not in taken.stderr, taken.stderr[-300:])
    finally:
        server.stop()
    out = os.path.join(work, "video.mp4")
    stale = os.path.join(work, ".video.mp4.partial-999999")
    open(stale, "wb").write(b"half a video")
    subprocess.run([spotter, "video", WALK, "--output", out, "--model", MODEL], capture_output=True, check=True)
    check("a partial file a killed run left is removed by the next run", not os.path.exists(stale) and os.path.exists(out))
    for command, expected in [(["record", WALK, "--album", "x", "--post-roll", "-1"], "cannot be negative"),
                              (["detect", PICTURE, "--threads", "-2"], "at least 1")]:
        done = subprocess.run([spotter, *command], capture_output=True, text=True)
        check(f"{' '.join(command[-2:])} is explained, not 'Missing value'", expected in done.stderr and "Missing value" not in done.stderr,
              done.stderr[:200])
    wrapped = []
    for command in ["detect", "video", "record", "track", "serve", "rectangles", "album", "faces enroll", "faces identify", "inspect", "bench"]:
        text = subprocess.run([spotter, *command.split(), "--help"], capture_output=True, text=True, env=dict(os.environ, COLUMNS="80")).stdout
        examples = text.split("Example", 1)[1].split("USAGE:", 1)[0] if "Example" in text else ""
        wrapped += [f"{command}: {line}" for line in examples.splitlines()[1:] if line and not line.startswith(" ")]
    check("help examples fit 80 columns (no command wraps)", not wrapped, wrapped)


def main():
    spotter = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="spotter-recorder-")
    try:
        media = make_media(work)
        for group in (waiting_checks, restart_checks, stall_checks, album_checks, rtsp_checks, smaller_checks):
            group(spotter, work, media)
        settings_checks(spotter, work)
        body_time_deepstack_checks(spotter, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
