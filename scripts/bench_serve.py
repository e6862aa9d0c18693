#!/usr/bin/env python3
"""Detect endpoint benchmark: `spotter serve`'s POST /api/v1/detect against a Python peer doing the
same job (the standard library's ThreadingHTTPServer, LiteRT with XNNPACK on 2 threads, OpenCV
decode and resize; one interpreter behind a lock, as a Python user would write it), same 600x400
JPEG, same machine, same client, in one run. Also the album list's latency.

The client is wrk (C, one thread, CONNECTIONS keep-alive connections for SECONDS), so the load
generator takes little of the 2 cores from either server; requests per second, p50/p99 latency,
then the ratio.

Usage (run by scripts/bench.sh --serve):
  bench_serve.py SPOTTER_BINARY [--seconds 10] [--connections 4]
"""
import argparse
import datetime
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time

import cv2

from checklib import MODEL, SHARED, free_port


PEER = r'''
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import cv2, numpy as np
from ai_edge_litert.interpreter import Interpreter
model, port = sys.argv[1], int(sys.argv[2])
labels = open(model.rsplit("/", 1)[0] + "/labelmap.txt").read().splitlines()
interpreter = Interpreter(model_path=model, num_threads=2)
interpreter.allocate_tensors()
inp = interpreter.get_input_details()[0]["index"]
outs = [d["index"] for d in interpreter.get_output_details()]
lock = threading.Lock()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        bgr = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_COLOR)
        h, w = bgr.shape[:2]
        rgb = cv2.resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), (300, 300), interpolation=cv2.INTER_LINEAR)
        with lock:
            interpreter.set_tensor(inp, rgb[None])
            interpreter.invoke()
            boxes, classes, scores, count = [interpreter.get_tensor(i)[0] for i in outs]
        detections = [{"label": labels[int(classes[i]) + 1], "score": float(scores[i]),
                       "box": {"xmin": float(boxes[i][1] * w), "ymin": float(boxes[i][0] * h),
                               "xmax": float(boxes[i][3] * w), "ymax": float(boxes[i][2] * h)}}
                      for i in range(int(count)) if scores[i] >= 0.5]
        data = json.dumps({"width": w, "height": h, "detections": detections}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def wait_for(port, method, path, body=None):
    for _ in range(300):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request(method, path, body=body)
            if connection.getresponse().status < 500:
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"no server on port {port}")


def load(port, method, path, body, seconds, connections):
    """Keeps `connections` keep-alive connections busy; returns (requests per second, latencies)."""
    latencies, lock, errors = [], threading.Lock(), []
    end = time.perf_counter() + seconds

    def worker():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        while time.perf_counter() < end:
            start = time.perf_counter()
            connection.request(method, path, body=body, headers={"Content-Type": "image/jpeg"} if body else {})
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                errors.append(response.status)
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit(f"{len(errors)} failed requests: {errors[:5]}")
    return len(latencies) / (time.perf_counter() - started), sorted(latencies)


def wrk(port, path, body_file, seconds, connections):
    """wrk's requests per second and p50/p99 latency (ms) for POSTs of `body_file` (GET without)."""
    script = body_file + ".lua"
    with open(script, "w") as f:
        if body_file.endswith(".jpg"):
            f.write(f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "image/jpeg"\n'
                    f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*a")\nf:close()\n')
        f.write('done = function(summary, latency, requests)\n'
                '  io.write(string.format("RESULT %f %f %f %d\\n", summary.requests / (summary.duration / 1e6), '
                'latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.errors.status))\nend\n')
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "-s", script, f"http://127.0.0.1:{port}{path}"],
                         check=True, capture_output=True, text=True).stdout
    fields = next(line for line in out.splitlines() if line.startswith("RESULT")).split()
    if int(fields[4]) > 0:
        sys.exit(f"{fields[4]} non-2xx answers from port {port}")
    return float(fields[1]), float(fields[2]), float(fields[3])


def percentile(values, p):
    return values[min(len(values) - 1, int(len(values) * p))] * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="spotter-bench-serve-")
    picture = cv2.resize(cv2.imread(os.path.join(SHARED, "images", "coffee.png")), (600, 400))
    jpeg = cv2.imencode(".jpg", picture, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()
    album = os.path.join(work, "album")
    subprocess.run([args.spotter, "record", os.path.join(SHARED, "videos", "asl-walk.mkv"), "--album", album, "--model", MODEL],
                   check=True, capture_output=True)
    peer_script = os.path.join(work, "peer_server.py")
    with open(peer_script, "w") as f:
        f.write(PEER)
    spotter_port, peer_port = free_port(), free_port()
    spotter = subprocess.Popen([args.spotter, "serve", "--album", album, "--port", str(spotter_port), "--model", MODEL],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peer = subprocess.Popen([sys.executable, peer_script, MODEL, str(peer_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(spotter_port, "GET", "/health")
        wait_for(peer_port, "POST", "/", jpeg)
        cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
        print(f"date {datetime.date.today()} | {cpu} | {os.cpu_count()} cores | {args.connections} connections x {args.seconds:g} s, 600x400 JPEG")
        body_file = os.path.join(work, "picture.jpg")
        with open(body_file, "wb") as f:
            f.write(jpeg)
        results = {}
        for name, port, path in [("peer (Python http.server + LiteRT)", peer_port, "/"), ("spotter serve", spotter_port, "/api/v1/detect")]:
            load(port, "POST", path, jpeg, 1, args.connections)  # warm-up
            rate, p50, p99 = wrk(port, path, body_file, args.seconds, args.connections)
            results[name] = rate
            print(f"  {name:<36} {rate:7.1f} req/s   p50 {p50:6.1f} ms   p99 {p99:6.1f} ms")
        ratio = results["spotter serve"] / results["peer (Python http.server + LiteRT)"]
        print(f"  detect endpoint ratio (spotter / peer): {ratio:.2f}x")
        rate, p50, p99 = wrk(spotter_port, "/api/v1/album", os.path.join(work, "album-list"), min(args.seconds, 5), args.connections)
        print(f"  album list (GET /api/v1/album)       {rate:7.1f} req/s   p50 {p50:6.1f} ms   p99 {p99:6.1f} ms")
    finally:
        spotter.terminate()
        peer.terminate()
        spotter.wait()
        peer.wait()


if __name__ == "__main__":
    main()
