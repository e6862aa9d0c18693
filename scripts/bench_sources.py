#!/usr/bin/env python3
"""Live-source benchmarks of `spotter serve` (release build, 127.0.0.1):

1. Sources per machine: N live sources, each the shared 768x432 10 fps video looped at real-time
   pace (as a camera delivers it), detecting every class, not recording. N grows until a source
   drops a frame or falls under 9.5 fps over the measured window (N steps by 1 to 8, then by 4, and
   by 1 again between the last count that held and the first that did not); the largest N with
   every frame detected is the figure (the issue's goal: 16 on 2 cores).
2. Viewers are cheap: one source watched by 1, then 20 viewers, each reading the source's live
   stream (every frame's detections and JPEG) as the live page does; the server's CPU time per
   second in both.

No Python peer runs here: the reference pipeline has no multi-source server to compare with.

3. Load (--load MINUTES): 4 live sources recording, 20 live-view clients (5 per source), an album
   client polling twice a second and a detect request a second; the server must stay up, lose no
   clip (every clip_finished event is in the album, complete, and posted to a webhook on
   127.0.0.1) and keep its RSS flat; prints the album list's and the detect endpoint's p50/p99
   latency and RSS over time.

4. Motion gating (--motion): the same count on mostly static camera-like video (an empty frame
   held 50 s with sensor noise, then a 10 s walk, looped; six copies starting at other points of
   that minute, so the walks do not all coincide), each source gating inference on motion
   (the issue's goal: 64 on 2 cores); the ceiling is 128.

5. Cluster mode (--cluster): after 1., the same count for one `serve --database` node on a
   throwaway PostgreSQL on this machine (fsync on), and the ratio (issue 37's goal: within 5%).

Usage (run by scripts/bench.sh --sources):
  bench_sources.py SPOTTER_BINARY [--seconds 15] [--max 32] [--rounds 3] [--viewers-only] [--load MINUTES] [--motion [--static-seconds 50]] [--cluster]
"""
import argparse
import datetime
import http.server
import json
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import cv2

from checklib import MODEL, SHARED, free_port, wait_until

VIDEO = os.path.join(SHARED, "videos", "one-by-one-person-detection.mp4")


def api(base, path, body=None, method=None):
    request = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        data = response.read()
        return json.loads(data) if data else None


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def totals(base, ids):
    statuses = [api(base, f"/api/v1/sources/{i}") for i in ids]
    return {k: sum(s[k] for s in statuses) for k in ("received", "processed", "dropped")}, statuses


def running(base):
    """The sources the server runs itself (its /metrics series)."""
    with urllib.request.urlopen(base + "/metrics", timeout=30) as response:
        return [line for line in response.read().decode().splitlines() if line.startswith("spotter_source_frames_total{")]


def start_server(spotter, work, port, hooks, database=None):
    return subprocess.Popen([spotter, "serve", "--album", os.path.join(work, "album"), "--port", str(port), "--model", MODEL,
                             "--media-dir", work, "--media-dir", os.path.dirname(VIDEO), "--webhook", f"http://127.0.0.1:{hooks.server_address[1]}/clips"]
                            + (["--database", database, "--node", "bench"] if database else []),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_up(base, path="/health", seconds=30):
    """Waits until `path` answers (a cluster node answers 503 until it has migrated its schema)."""
    def answers():
        urllib.request.urlopen(base + path, timeout=2).close()  # raises while refused or 503
        return True
    if not wait_until(answers, seconds):
        raise SystemExit(f"the server at {base} did not answer {path} within {seconds} s")


def cluster_overhead(spotter, work, hooks, seconds, largest):
    """Sources per machine of one node in cluster mode (a throwaway PostgreSQL on this machine),
    after the same figure of the server on its own, in one run."""
    from check_cluster import Postgres
    database = Postgres(work, fsync=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(spotter, work, port, hooks, database.url)
    try:
        wait_up(base, "/api/v1/sources")
        print("sources per machine, one node in cluster mode (--database, PostgreSQL on this machine):")
        return sources_per_machine(base, seconds, largest, pid=server.pid, database=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
        database.stop()


def static_videos(work, count=6, static_seconds=50):
    """Camera-like and mostly static: an empty frame of the shared video held for `static_seconds`
    with sensor noise, then 10 s of it with a person walking through (looped by the sources);
    `count` copies, each starting at another point of the loop, so the cameras' walks do not all
    coincide."""
    import numpy as np
    capture = cv2.VideoCapture(VIDEO)
    frames = []
    while len(frames) < 170:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    h, w = frames[0].shape[:2]
    rng = np.random.default_rng(3)
    still = frames[60].astype(np.int16)
    minute = [np.clip(still + rng.normal(0, 2.0, still.shape), 0, 255).astype(np.uint8) for _ in range(int(static_seconds * 10))] + frames[60:160]
    paths = []
    for k in range(count):
        path = os.path.join(work, f"static-{k}.mp4")
        encoder = subprocess.Popen(["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{w}x{h}", "-r", "10", "-i", "-",
                                    "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p", path], stdin=subprocess.PIPE)
        shift = k * len(minute) // count
        for frame in minute[shift:] + minute[:shift]:
            encoder.stdin.write(frame.tobytes())
        encoder.stdin.close()
        encoder.wait()
        paths.append(path)
    return paths


def postgres_cpu_seconds():
    """CPU seconds of every PostgreSQL server process on this machine (the benchmark's throwaway one)."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "postgres":
                    continue
            total += cpu_seconds(int(pid))
        except OSError:
            pass
    return total


def sources_per_machine(base, seconds, largest, videos=(VIDEO,), motion=False, pid=None, database=False):
    best = 0
    steps = [8, 16, 32, 48, 64, 80, 96, 112, 128] if motion else None
    n = steps.pop(0) if motion else 1
    refine = not motion
    while n <= largest:
        def spec(i):
            spec = {"input": videos[i % len(videos)], "realtime": True, "loop": True, "record": False, "classes": []}
            if motion:
                spec["motion"] = True
            return spec
        try:
            ids = [api(base, "/api/v1/sources", spec(i))["id"] for i in range(n)]
        except urllib.error.HTTPError as error:
            if error.code != 409:
                raise
            print(f"  {n:3d} sources: refused, the server's limit of sources is reached ({json.load(error)['error']['message']})")
            for earlier in api(base, "/api/v1/sources")["sources"]:
                api(base, f"/api/v1/sources/{earlier['id']}", method="DELETE")
            break
        # in cluster mode (202) the node starts them at its next lease round
        deadline = time.time() + 30
        while time.time() < deadline and not all("processed" in api(base, f"/api/v1/sources/{i}") for i in ids):
            time.sleep(0.2)
        time.sleep(4)  # warm-up: open, first frames
        before, _ = totals(base, ids)
        cpu_before = (cpu_seconds(pid) if pid else 0, postgres_cpu_seconds() if database else 0)
        time.sleep(seconds)
        after, statuses = totals(base, ids)
        cpu = ((cpu_seconds(pid) if pid else 0) - cpu_before[0], (postgres_cpu_seconds() if database else 0) - cpu_before[1])
        for i in ids:
            api(base, f"/api/v1/sources/{i}", method="DELETE")
        while running(base):  # in cluster mode the node stops them at its next lease round
            time.sleep(0.2)
        processed = after["processed"] - before["processed"]
        dropped = after["dropped"] - before["dropped"]
        fps = processed / seconds / n
        inference = sum(s["inference_ms"] for s in statuses) / n
        skipped = sum(s.get("skipped", 0) for s in statuses) / max(1, sum(s["processed"] for s in statuses))
        ok = dropped == 0 and fps >= 9.5
        usage = (f", server {cpu[0] / seconds * 100:3.0f}% of a core" if pid else "") + (f", PostgreSQL {cpu[1] / seconds * 100:3.0f}%" if database else "")
        print(f"  {n:3d} sources: {fps:5.2f} fps each, {dropped:4d} dropped, inference {inference:5.1f} ms, {skipped:4.0%} skipped{usage}  "
              f"{'ok' if ok else 'over capacity'}", flush=True)
        if not ok:
            if refine and n - best > 1:
                # the steps above 8 are 4 apart: try the counts between the last that held and this one
                n, refine = best + 1, False
                continue
            break
        best = n
        if not refine:
            n += 1
            continue
        if motion:
            if not steps:
                break
            n = steps.pop(0)
        else:
            n = n + 1 if n < 8 else n + 4
    return best


class Viewer(threading.Thread):
    """Reads a source's live stream as the live page does: one line of detection JSON per frame,
    followed by the frame's JPEG."""

    def __init__(self, base, source, stop):
        super().__init__(daemon=True)
        self.base, self.source, self.stop, self.frames = base, source, stop, 0

    def run(self):
        stream = urllib.request.urlopen(f"{self.base}/api/v1/live?sources={self.source}&types=detection", timeout=30)
        while not self.stop.is_set():
            line = stream.readline()
            if not line:
                break
            event = json.loads(line)
            if event.get("jpeg_bytes"):
                jpeg = stream.read(event["jpeg_bytes"])
                if jpeg[:3] != b"\xff\xd8\xff":
                    raise RuntimeError(f"frame {event['frame']} is not a JPEG")
                self.frames += 1
        stream.close()


def viewers_cost(base, pid, seconds, rounds):
    """Server CPU (share of a core) with 1 and with 20 viewers, alternated `rounds` times; medians."""
    source = api(base, "/api/v1/sources", {"input": VIDEO, "realtime": True, "loop": True, "record": False})["id"]
    time.sleep(3)
    results = {1: [], 20: []}
    for _ in range(rounds):
        for count in (1, 20):
            stop = threading.Event()
            viewers = [Viewer(base, source, stop) for _ in range(count)]
            for v in viewers:
                v.start()
            time.sleep(2)
            start_cpu, start = cpu_seconds(pid), time.time()
            start_frames = sum(v.frames for v in viewers)
            time.sleep(seconds)
            cpu = (cpu_seconds(pid) - start_cpu) / (time.time() - start)
            frames = (sum(v.frames for v in viewers) - start_frames) / seconds / count
            stop.set()
            results[count].append(cpu)
            print(f"  {count:3d} viewer(s): server CPU {cpu * 100:5.1f}% of a core, {frames:4.1f} frames/s per viewer", flush=True)
            time.sleep(1)
    api(base, f"/api/v1/sources/{source}", method="DELETE")
    return {count: sorted(values)[len(values) // 2] for count, values in results.items()}


def timed(call):
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def rss_mib(base):
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    line = next(l for l in text.splitlines() if l.startswith("spotter_process_resident_bytes "))
    return int(line.split()[1]) / 1048576


class Hooks(http.server.BaseHTTPRequestHandler):
    """A webhook receiver: keeps the clip id of every clip_finished POST."""
    received = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        event = json.loads(body)
        if event["type"] == "clip_finished":
            Hooks.received.append(event["clip"]["id"])
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def load(base, minutes):
    ids = [api(base, "/api/v1/sources", {"input": VIDEO, "realtime": True, "loop": True, "record": True})["id"] for _ in range(4)]
    stop = threading.Event()
    finished = []
    def clip_events():
        stream = urllib.request.urlopen(f"{base}/api/v1/events?types=clip_finished", timeout=60)
        for raw in stream:
            line = raw.decode().strip()
            if line.startswith("data: "):
                finished.append(json.loads(line[6:])["clip"]["id"])
            if stop.is_set():
                break
    threading.Thread(target=clip_events, daemon=True).start()
    viewers = [Viewer(base, ids[i % 4], stop) for i in range(20)]
    for v in viewers:
        v.start()
    album_ms, detect_ms, rss = [], [], []
    picture = cv2.imencode(".jpg", cv2.resize(cv2.imread(os.path.join(SHARED, "images", "coffee.png")), (600, 400)))[1].tobytes()
    def detect():
        request = urllib.request.Request(base + "/api/v1/detect", data=picture, headers={"Content-Type": "image/jpeg"})
        urllib.request.urlopen(request, timeout=30).read()
    end = time.time() + minutes * 60
    next_detect = next_rss = time.time()
    while time.time() < end:
        album_ms.append(timed(lambda: urllib.request.urlopen(base + "/api/v1/album?limit=24", timeout=30).read()))
        if time.time() >= next_detect:
            detect_ms.append(timed(detect))
            next_detect += 1
        if time.time() >= next_rss:
            rss.append(rss_mib(base))
            print(f"  {len(rss) * 30 - 30:4d} s: RSS {rss[-1]:6.1f} MiB, {len(finished)} clips finished", flush=True)
            next_rss += 30
        time.sleep(0.5)
    for i in ids:
        api(base, f"/api/v1/sources/{i}", method="DELETE")
    time.sleep(1)
    stop.set()
    clips = api(base, "/api/v1/album?limit=500")["clips"]
    in_album = {c["id"] for c in clips}
    lost = [i for i in finished if i not in in_album]
    unposted = [i for i in finished if i not in Hooks.received]
    incomplete = [c["id"] for c in clips if c["incomplete"]]
    print(f"  album list: p50 {percentile(album_ms, 0.5):.1f} ms, p99 {percentile(album_ms, 0.99):.1f} ms ({len(album_ms)} requests)")
    print(f"  detect: p50 {percentile(detect_ms, 0.5):.1f} ms, p99 {percentile(detect_ms, 0.99):.1f} ms ({len(detect_ms)} requests)")
    print(f"  clips: {len(finished)} finished while running, {len(clips)} in the album, {len(lost)} lost, {len(incomplete)} incomplete")
    print(f"  webhook: {len(Hooks.received)} posts, {len(unposted)} finished clips not posted")
    print(f"  RSS: {rss[0]:.1f} MiB at the start, {max(rss):.1f} max, {rss[-1]:.1f} at the end")
    print(f"  viewers: {sum(v.frames for v in viewers) / (minutes * 60) / 20:.1f} frames/s each")


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--max", type=int, default=32)
    parser.add_argument("--load", type=float, help="minutes of the load run instead of the two benchmarks")
    parser.add_argument("--viewers-only", action="store_true", help="only the viewers benchmark")
    parser.add_argument("--motion", action="store_true", help="sources per machine with motion gating on mostly static video (--max 128)")
    parser.add_argument("--static-seconds", type=float, default=50, help="with --motion: seconds of still picture before each 10 s walk")
    parser.add_argument("--cluster", action="store_true", help="then the same count for one node in cluster mode (a throwaway PostgreSQL)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of 1 then 20 viewers (medians)")
    args = parser.parse_args()
    if args.motion and args.max == 32:
        args.max = 128
    work = tempfile.mkdtemp(prefix="spotter-bench-sources-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    hooks = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hooks)
    threading.Thread(target=hooks.serve_forever, daemon=True).start()
    server = start_server(args.spotter, work, port, hooks)
    try:
        wait_up(base)
        cpu = platform.processor() or platform.machine()
        try:
            cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
        except (OSError, StopIteration):
            pass
        print(f"{datetime.date.today()}, {cpu}, {os.cpu_count()} cores; {os.path.basename(VIDEO)} looped at 10 fps per source")
        if args.load:
            print(f"load: 4 sources recording, 20 viewers, album polling, a detect request a second, {args.load:g} minutes")
            load(base, args.load)
            return
        if args.motion:
            print(f"sources per machine with motion gating, mostly static camera-like video ({args.static_seconds:g} s still, then a 10 s "
                  "walk; every frame read, none dropped; frames with motion analysed):")
            best = sources_per_machine(base, args.seconds, args.max, static_videos(work, static_seconds=args.static_seconds), motion=True)
            print(f"  => {best} sources" + (" (the ceiling: raise --max)" if best >= args.max else ""))
            return
        if not args.viewers_only:
            print("sources per machine (every frame detected, none dropped):")
            best = sources_per_machine(base, args.seconds, args.max, pid=server.pid)
            print(f"  => {best} sources")
        if args.cluster:
            server.terminate()
            server.wait(timeout=30)
            clustered = cluster_overhead(args.spotter, work, hooks, args.seconds, args.max)
            print(f"  => {clustered} sources in cluster mode, {clustered / max(best, 1):.2f}x the server on its own (goal: at least 0.95x)")
            return
        print("viewers of one source:")
        cost = viewers_cost(base, server.pid, args.seconds, args.rounds)
        extra = cost[20] / cost[1] - 1 if cost[1] > 0 else float("nan")
        per_frame = (cost[20] - cost[1]) / (19 * 10) * 1e6
        print(f"  => 20 viewers cost {extra * 100:+.1f}% server CPU against 1 viewer (medians of {args.rounds} rounds; "
              f"about {per_frame:.0f} us of CPU per frame per extra viewer)")
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
