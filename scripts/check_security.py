#!/usr/bin/env python3
"""Inputs a stranger controls, against the built `spotter`: each hole the security pass found
(issue 31) is tried here and must stay shut.

  sources     20 inputs naming private files or FFmpeg protocols (a plain path outside the allowed
              folders, a symbolic link out of one, file:, concat:, subfile:, pipe:, data:, crypto:,
              an HLS playlist and an HTTP redirect leading to a local file, a FIFO, a folder, ...)
              are refused or open nothing; a file in --media-dir and an upload still play
  origins     text/plain and JSON from a foreign Origin or Referer, a foreign Host, a cross-site
              upload and detect: refused; no CORS header on any answer; same-origin and curl work
  bombs       five picture bombs (scripts/make_picture_bombs.py), three at once to both detect
              endpoints: 4xx within a second each, the server's peak memory (VmHWM) under 600 MB;
              `spotter detect` refuses each within a second
  tokens      a 1-character token and a short one beyond loopback are refused; 10 wrong logins
              then 429 with Retry-After; the cookie is a session id, not the token; /health tells
              no path
  files       a FIFO named b.jpg in a folder does not block `detect DIR`; `detect`, `video` and
              `record` on a FIFO answer at once
  clients     a header byte a second and a stalled body are cut at --idle-timeout; connections past
              --max-connections are closed
  uploads     a GIF whose 188th byte is 0x47 (sniffed as MPEG-TS before) is refused after probing;
              uploads past --max-uploads-gib are refused with 507

Usage: check_security.py SPOTTER_BINARY
Prints one line per check and `N passed, M failed`.
"""
import concurrent.futures
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import http.server

from checklib import MODEL, ROOT, SHARED, check, free_port, summary, surest_picture

VIDEO = os.path.join(SHARED, "videos", "asl-walk.mkv")
BOMBS = os.path.join(ROOT, "fixtures-generated", "bombs")
TOKEN = "correct-horse-battery-staple"


def request(port, method, path, body=None, headers=None, timeout=30):
    """(status, headers, body bytes) of one request; Host is localhost:PORT unless given."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = dict(headers or {})
    connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    connection.putheader("Host", headers.pop("Host", f"localhost:{port}"))
    for key, value in headers.items():
        connection.putheader(key, value)
    data = body.encode() if isinstance(body, str) else body
    if data is not None and "Content-Length" not in headers:
        connection.putheader("Content-Length", str(len(data)))
    connection.endheaders(data)
    response = connection.getresponse()
    result = (response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    connection.close()
    return result


class Server:
    def __init__(self, spotter, album, *extra, environment=None):
        self.port = free_port()
        self.process = subprocess.Popen([spotter, "serve", "--album", album, "--port", str(self.port), "--model", MODEL, "--threads", "1",
                                         *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        env=None if environment is None else dict(os.environ, **environment))
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                request(self.port, "GET", "/health", timeout=1)
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("the server did not start: " + self.process.stderr.read())

    def peak_kib(self):
        with open(f"/proc/{self.process.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


class FileTrap(http.server.BaseHTTPRequestHandler):
    """An HLS playlist whose segment is a local file, and a redirect to file:."""
    target = ""

    def do_GET(self):
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "file://" + self.target)
            self.end_headers()
            return
        body = f"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile://{self.target}\n#EXTINF:10,\n{self.target}\n#EXT-X-ENDLIST\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.apple.mpegurl")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def post_json(port, path, payload, **headers):
    return request(port, "POST", path, json.dumps(payload), {"Content-Type": "application/json", **headers})


def sources_checks(spotter, work):
    private = os.path.join(work, "private")
    media = os.path.join(work, "media")
    os.makedirs(private)
    os.makedirs(media)
    secret = os.path.join(private, "secret.mkv")
    shutil.copy(VIDEO, secret)
    shutil.copy(VIDEO, os.path.join(media, "walk.mkv"))
    os.symlink(secret, os.path.join(media, "link-out.mkv"))
    os.mkfifo(os.path.join(media, "pipe.mkv"))
    os.makedirs(os.path.join(media, "folder.mkv"))
    FileTrap.target = secret
    trap = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FileTrap)
    threading.Thread(target=trap.serve_forever, daemon=True).start()
    trap_base = f"http://127.0.0.1:{trap.server_address[1]}"
    album = os.path.join(work, "album-sources")
    server = Server(spotter, album, "--media-dir", media)
    try:
        refused = [secret, os.path.join(media, "link-out.mkv"), f"file:{secret}", f"file://{secret}", f"concat:{secret}|{secret}",
                   f"subfile:,start,0,end,0,,:{secret}", "pipe:0", "data:video/mp4;base64,AAAAGGZ0eXBtcDQy", f"crypto:{secret}",
                   f"async:file:{secret}", os.path.join(media, "..", "private", "secret.mkv"), "/proc/self/environ",
                   os.path.join(media, "pipe.mkv"), os.path.join(media, "folder.mkv"), "gopher://127.0.0.1/x", "unix:/tmp/x",
                   "rtsp:no-host", "http:/no-host"]
        for input in refused:
            status, _, body = post_json(server.port, "/api/v1/sources", {"input": input, "classes": []})
            check(f"source {input[:60]} is refused (400)", status == 400, f"{status} {body[:200]}")
        # Network URLs are allowed by scheme; what they lead to must not reach a file.
        ids = []
        for input in [trap_base + "/list.m3u8", trap_base + "/redirect"]:
            status, _, body = post_json(server.port, "/api/v1/sources", {"input": input, "classes": [], "record": True})
            ids.append((input, json.loads(body).get("id") if status == 201 else None))
        good = []
        for input in [os.path.join(media, "walk.mkv")]:
            status, _, body = post_json(server.port, "/api/v1/sources", {"input": input, "classes": [], "record": False})
            check("a file in --media-dir is accepted", status == 201, f"{status} {body[:200]}")
            good.append(json.loads(body).get("id"))
        deadline = time.time() + 30
        while time.time() < deadline:
            states = {s["id"]: s for s in json.loads(request(server.port, "GET", "/api/v1/sources")[2])["sources"]}
            # A network source that cannot be opened is retried (waiting) or has failed; either way, no frame.
            if all(states.get(i, {}).get("state") in ("failed", "waiting", "finished", "stopped") for _, i in ids if i) and \
               all(states.get(i, {}).get("state") == "finished" for i in good):
                break
            time.sleep(0.5)
        for input, source in ids:
            state = states.get(source, {})
            check(f"{input.rsplit('/', 1)[1]} on a network URL reads no local file (state {state.get('state')}, {state.get('frames')} frames)",
                  source is None or (state.get("frames") == 0 and state.get("state") in ("failed", "waiting")), state.get("message"))
        check("the --media-dir file played to its end", all(states.get(i, {}).get("frames", 0) > 0 for i in good),
              [states.get(i) for i in good])
        clips = json.loads(request(server.port, "GET", "/api/v1/album")[2])["clips"]
        check("nothing from the private folder reached the album", not any("private" in c["source"] for c in clips), clips)
    finally:
        server.stop()
        trap.shutdown()


def origin_checks(spotter, work):
    server = Server(spotter, os.path.join(work, "album-origins"))
    port = server.port
    try:
        body = json.dumps({"input": "rtsp://127.0.0.1:9/cam", "record": False})
        cases = [
            ("text/plain from a foreign Origin", "POST", "/api/v1/sources", body, {"Content-Type": "text/plain", "Origin": "http://evil.example"}, 403),
            ("JSON from a foreign Origin", "POST", "/api/v1/sources", body, {"Content-Type": "application/json", "Origin": "http://evil.example"}, 403),
            ("JSON from a foreign Referer", "POST", "/api/v1/sources", body, {"Content-Type": "application/json", "Referer": "http://evil.example/a"}, 403),
            ("an Origin on another port", "POST", "/api/v1/sources", body, {"Content-Type": "application/json", "Origin": "http://localhost:1"}, 403),
            ("the null Origin (sandboxed frame)", "POST", "/api/v1/sources", body, {"Content-Type": "application/json", "Origin": "null"}, 403),
            ("text/plain JSON without Origin", "POST", "/api/v1/sources", body, {"Content-Type": "text/plain"}, 415),
            ("a form post of JSON", "POST", "/api/v1/sources", body, {"Content-Type": "application/x-www-form-urlencoded"}, 415),
            ("a cross-site upload", "POST", "/api/v1/uploads", b"\x1aE\xdf\xa3" + bytes(600), {"Origin": "http://evil.example"}, 403),
            ("a cross-site detect", "POST", "/api/v1/detect", open(surest_picture()[0], "rb").read(),
             {"Origin": "http://evil.example"}, 403),
            ("a cross-site delete", "DELETE", "/api/v1/sources/s1", None, {"Origin": "http://evil.example"}, 403),
            ("a foreign Host (DNS rebinding)", "GET", "/api/v1/album", None, {"Host": f"attacker.example:{port}"}, 421),
            ("a foreign Host on a page", "GET", "/album", None, {"Host": "attacker.example"}, 421),
        ]
        for name, method, path, data, headers, expected in cases:
            status, answer_headers, answer = request(port, method, path, data, headers)
            check(f"{name} is refused ({expected})", status == expected, f"{status} {answer[:160]}")
            check(f"{name}: no CORS header", not any(k.startswith("access-control") for k in answer_headers), answer_headers)
        status, _, answer = post_json(port, "/api/v1/sources", {"input": "rtsp://127.0.0.1:9/cam", "record": False},
                                      Origin=f"http://localhost:{port}")
        check("same-origin JSON (the pages) is accepted", status == 201, f"{status} {answer[:160]}")
        status, _, answer = post_json(port, "/api/v1/sources", {"input": "rtsp://127.0.0.1:9/cam2", "record": False})
        check("JSON without Origin (curl, scripts) is accepted", status == 201, f"{status} {answer[:160]}")
        status, _, _ = request(port, "GET", "/api/v1/album", headers={"Host": f"127.0.0.1:{port}"})
        check("Host 127.0.0.1 is served", status == 200)
        status, _, _ = request(port, "GET", "/health", headers={"Host": f"[::1]:{port}"})
        check("Host [::1] is served", status == 200)
    finally:
        server.stop()
    server = Server(spotter, os.path.join(work, "album-origins"), "--allowed-hosts", "cams.example.lan")
    try:
        status, _, _ = request(server.port, "GET", "/api/v1/album", headers={"Host": "cams.example.lan:8080"})
        check("--allowed-hosts adds a name", status == 200, status)
    finally:
        server.stop()


def bomb_checks(spotter, work):
    bombs = sorted(f for f in os.listdir(BOMBS) if f.startswith("bomb"))
    for name in bombs:
        start = time.time()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", spotter, "detect", os.path.join(BOMBS, name), "--model", MODEL],
                              capture_output=True, text=True, timeout=60)
        seconds = time.time() - start
        peak = int(done.stderr.strip().splitlines()[-1])
        check(f"detect refuses {name} in {seconds:.2f} s, peak {peak // 1024} MiB", done.returncode == 1 and "declares" in done.stderr
              and seconds < 1.5 and peak < 200 * 1024, done.stderr[-300:])
    server = Server(spotter, os.path.join(work, "album-bombs"), "--threads", "2")
    try:
        before = server.peak_kib()
        jobs = [(name, path) for name in bombs for path in ("/api/v1/detect", "/v1/vision/detection") for _ in range(3)]

        def post(job):
            start = time.time()
            status, _, body = request(server.port, "POST", job[1], open(os.path.join(BOMBS, job[0]), "rb").read())
            return job, status, time.time() - start, body

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            results = list(pool.map(post, jobs))
        slow = [(j, s, round(t, 2)) for j, s, t, _ in results if not (400 <= s < 500 and t < 1.0)]
        check(f"{len(results)} bomb posts, three at once, each 4xx within 1 s", not slow, slow)
        peak = server.peak_kib()
        check(f"the server's peak memory stays under 600 MB ({before // 1024} -> {peak // 1024} MiB)", peak < 600 * 1024)
        status, _, body = request(server.port, "POST", "/api/v1/detect", open(os.path.join(BOMBS, "ok.gif"), "rb").read())
        check("a small GIF still decodes", status == 200, body[:200])
    finally:
        server.stop()


def token_checks(spotter, work):
    album = os.path.join(work, "album-tokens")
    for args, expected in [(["--token", "a"], "at least 12"), (["--host", "0.0.0.0", "--token", "fifteen-chars-x"], "at least 16"),
                           (["--host", "0.0.0.0"], "token")]:
        done = subprocess.run([spotter, "serve", "--album", album, "--port", str(free_port()), *args], capture_output=True, text=True, timeout=30)
        check(f"serve {' '.join(args)} is refused", done.returncode != 0 and expected in done.stderr, done.stderr[-200:])
    server = Server(spotter, album, "--token", TOKEN)
    port = server.port
    try:
        status, _, body = request(port, "GET", "/health")
        check("/health tells no path with a token", status == 200 and json.loads(body) == {"status": "ok"}, body)
        status, headers, _ = request(port, "POST", "/login", f"token={TOKEN}&next=/live", {"Content-Type": "application/x-www-form-urlencoded",
                                                                                            "Origin": f"http://localhost:{port}"})
        cookie = headers.get("set-cookie", "")
        check("a right token signs in and returns to the page asked for", status == 303 and headers.get("location") == "/live", headers)
        check("the cookie holds a session id, not the token", TOKEN not in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie, cookie)
        session = cookie.split(";")[0]
        status, _, _ = request(port, "GET", "/api/v1/album", headers={"Cookie": session})
        check("the session cookie opens the API", status == 200, status)
        status, _, _ = request(port, "GET", "/api/v1/album", headers={"Cookie": f"spotter_token={TOKEN}"})
        check("the token as a cookie does not", status == 401, status)
        status, _, _ = post_json(port, "/api/v1/sources", {"input": "rtsp://127.0.0.1:9/x"}, Cookie=session)
        check("a change with only the cookie and no Origin is refused", status == 403, status)
        status, _, _ = post_json(port, "/api/v1/sources", {"input": "rtsp://127.0.0.1:9/x", "record": False},
                                 Authorization=f"Bearer {TOKEN}")
        check("a change with the bearer token and no Origin is accepted", status == 201, status)
        statuses = []
        for i in range(12):
            status, headers, body = request(port, "POST", "/login", f"token=guess{i}", {"Content-Type": "application/x-www-form-urlencoded"})
            statuses.append(status)
        check("10 wrong logins are answered 401, then 429", statuses[:10] == [401] * 10 and statuses[10:] == [429, 429], statuses)
        check("429 says when to retry", int(headers.get("retry-after", "0")) > 0, headers)
        status, _, _ = request(port, "GET", "/api/v1/album", headers={"Authorization": f"Bearer {TOKEN}-no"})
        check("wrong bearer tokens count too", status == 429, status)
        status, _, _ = request(port, "GET", "/api/v1/album", headers={"Cookie": session})
        check("a signed-in session still works meanwhile", status == 200, status)
    finally:
        server.stop()
    # The token from the environment, where other local users cannot read it (ps shows arguments).
    server = Server(spotter, album, environment={"SPOTTER_TOKEN": TOKEN})
    try:
        without, _, _ = request(server.port, "GET", "/api/v1/album")
        wrong, _, _ = request(server.port, "GET", "/api/v1/album", headers={"Authorization": f"Bearer {TOKEN}-no"})
        right, _, _ = request(server.port, "GET", "/api/v1/album", headers={"Authorization": f"Bearer {TOKEN}"})
        with open(f"/proc/{server.process.pid}/cmdline", "rb") as f:
            arguments = f.read().decode(errors="replace")
        check("serve takes SPOTTER_TOKEN when --token is not given: no token 401, a wrong one 401, the right one 200, "
              "and the token is not among its arguments", (without, wrong, right) == (401, 401, 200) and TOKEN not in arguments,
              (without, wrong, right))
    finally:
        server.stop()
    done = subprocess.run([spotter, "serve", "--album", album, "--port", str(free_port()), "--host", "0.0.0.0"], capture_output=True,
                          text=True, timeout=30, env=dict(os.environ, SPOTTER_TOKEN="short"))
    check("a SPOTTER_TOKEN too short for --host 0.0.0.0 is refused as --token is (its length named)",
          done.returncode != 0 and "has 5 characters" in done.stderr and "at least 16" in done.stderr,
          done.stderr[-200:])


def file_checks(spotter, work):
    folder = os.path.join(work, "pictures")
    os.makedirs(folder)
    # A picture with LiteRT's top detection on it, and a FIFO named as a picture.
    picture, litert = surest_picture()
    shutil.copy(picture, os.path.join(folder, "a.png"))
    os.mkfifo(os.path.join(folder, "b.jpg"))
    start = time.time()
    try:
        done = subprocess.run([spotter, "detect", folder, "--model", MODEL], capture_output=True, text=True, timeout=20)
        check(f"detect on a folder holding a FIFO finishes ({time.time() - start:.1f} s)", done.returncode == 0 and litert[0]["label"] in done.stdout
              and "named pipe" in done.stderr, done.stderr[-200:])
    except subprocess.TimeoutExpired:
        check("detect on a folder holding a FIFO finishes", False, "blocked")
    fifo = os.path.join(folder, "b.jpg")
    for command in (["detect", fifo], ["video", fifo, "--output", os.path.join(work, "out.mp4")],
                    ["record", fifo, "--album", os.path.join(work, "album-fifo")]):
        start = time.time()
        try:
            done = subprocess.run([spotter, *command, "--model", MODEL], capture_output=True, text=True, timeout=10)
            check(f"{command[0]} on a FIFO answers at once ({time.time() - start:.1f} s)", done.returncode != 0 and "named pipe" in done.stderr,
                  done.stderr[-200:])
        except subprocess.TimeoutExpired:
            check(f"{command[0]} on a FIFO answers at once", False, "blocked")


def client_checks(spotter, work):
    server = Server(spotter, os.path.join(work, "album-clients"), "--idle-timeout", "2", "--max-connections", "20")
    try:
        s = socket.create_connection(("127.0.0.1", server.port))
        start, closed = time.time(), None
        for byte in b"GET /api/v1/album HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 40 + b"\r\n\r\n":
            try:
                s.send(bytes([byte]))
                s.settimeout(1.0)
                if s.recv(1) == b"":
                    closed = time.time() - start
                    break
            except socket.timeout:
                continue
            except OSError:
                closed = time.time() - start
                break
        check(f"a header sent a byte a second is cut ({closed and round(closed, 1)} s, --idle-timeout 2)", closed is not None and closed < 5)
        s = socket.create_connection(("127.0.0.1", server.port))
        start = time.time()
        s.sendall(b"POST /api/v1/detect HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n" + b"x" * 10)
        s.settimeout(15)
        try:
            while s.recv(1000):
                pass
        except OSError:
            pass
        check(f"a stalled body is cut ({time.time() - start:.1f} s)", time.time() - start < 5)
        sockets = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(30)]
        time.sleep(0.5)
        answered = 0
        for c in sockets:
            c.settimeout(1)
            try:
                c.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                answered += c.recv(100).startswith(b"HTTP/1.1 200")
            except OSError:
                pass
        check(f"connections past --max-connections 20 are closed ({answered} of 30 answered)", answered == 20, answered)
        for c in sockets:
            c.close()
    finally:
        server.stop()


def upload_checks(spotter, work):
    server = Server(spotter, os.path.join(work, "album-uploads"), "--max-uploads-gib", str(400_000 / 2**30))
    try:
        gif = bytearray(open(os.path.join(BOMBS, "ok.gif"), "rb").read()) + bytes(600)
        gif[188] = 0x47
        status, _, body = request(server.port, "POST", "/api/v1/uploads?name=fake.ts", bytes(gif))
        check("a GIF whose 188th byte is 0x47 is not taken as MPEG-TS", status == 415, f"{status} {body[:200]}")
        video = open(VIDEO, "rb").read()
        status, _, body = request(server.port, "POST", "/api/v1/uploads?name=walk", video)
        check("a real video upload is kept", status == 201, f"{status} {body[:200]}")
        status, _, body = request(server.port, "POST", "/api/v1/uploads?name=walk", video)
        check("an upload past --max-uploads-gib is refused with 507", status == 507, f"{status} {body[:200]}")
        uploads = os.listdir(os.path.join(work, "album-uploads", "uploads"))
        check("refused uploads leave nothing behind", uploads == ["walk.mkv"], uploads)
    finally:
        server.stop()


def main():
    spotter = os.path.abspath(sys.argv[1])
    if not os.path.isdir(BOMBS):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_picture_bombs.py")], check=True, capture_output=True)
    work = tempfile.mkdtemp(prefix="spotter-security-")
    try:
        for group in (sources_checks, origin_checks, bomb_checks, token_checks, file_checks, client_checks, upload_checks):
            group(spotter, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
