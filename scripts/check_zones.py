#!/usr/bin/env python3
"""Zones and lines of `spotter track --zones --events`, against an independent implementation of
the contract (issue 33) written here from its text, on synthetic trajectories whose events are
also known by construction: crossing back and forth, touching an edge, a gap of missed frames,
two objects passing each other, a stationary one, beyond a line's end, normalized coordinates,
a self-intersecting polygon, loitering, and random walks.

  scripts/check_zones.py SPOTTER

Each case writes detections (MOTChallenge), runs Spotter, reads the tracks it wrote (OUT.txt) and
computes the events those observations must give; they must equal Spotter's --events exactly (same
lines, same order within a frame up to sorting). Where the right answer is known without the
tracks (a walk that crosses a line three times), that is checked too. Exit status 1 on failure.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

FAILURES = []
CHECKS = 0


def check(condition, message):
    global CHECKS
    CHECKS += 1
    if not condition:
        FAILURES.append(message)
        print("FAIL", message)


# ---- The contract, implemented independently ---------------------------------------------------

def side_value(a, b, p):
    return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])


def on_segment(p, a, b):
    return side_value(a, b, p) == 0 and min(a[0], b[0]) <= p[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= p[1] <= max(a[1], b[1])


def segments_intersect(p1, p2, q1, q2):
    """Closed segments: any common point, touching and collinear overlaps included."""
    def orient(a, b, c):
        v = side_value(a, b, c)
        return (v > 0) - (v < 0)
    o1, o2, o3, o4 = orient(q1, q2, p1), orient(q1, q2, p2), orient(p1, p2, q1), orient(p1, p2, q2)
    if o1 != o2 and o3 != o4 and 0 not in (o1, o2, o3, o4):
        return True
    return on_segment(p1, q1, q2) or on_segment(p2, q1, q2) or on_segment(q1, p1, p2) or on_segment(q2, p1, p2)


def in_polygon(polygon, p):
    """Inside or on the boundary; even-odd rule (winding ignored)."""
    n = len(polygon)
    for i in range(n):
        if on_segment(p, polygon[i], polygon[(i + 1) % n]):
            return True
    x, y = p
    crossings = 0
    for i in range(n):
        (x1, y1), (x2, y2) = polygon[i], polygon[(i + 1) % n]
        if (y1 > y) != (y2 > y):
            x_at = x1 + (y - y1) * (x2 - x1) / (y2 - y1)
            if x < x_at:
                crossings += 1
    return crossings % 2 == 1


def expected_events(rows, layout, frame_rate):
    """rows: (frame, id, x, y, w, h) as OUT.txt has them. Returns event dicts in frame order."""
    zones = layout.get("zones", [])
    lines = layout.get("lines", [])
    by_track = {}
    for frame, track, x, y, w, h in sorted(rows):
        by_track.setdefault(track, []).append((frame, (x + w / 2, y + h)))
    events = []
    for track, observations in by_track.items():
        for zone in zones:
            inertia = zone.get("inertia", 3)
            loiter = zone.get("loitering_seconds")
            inside, streak, entered, loitered = False, 0, None, False
            for frame, p in observations:
                now = in_polygon(zone["polygon"], p)
                if now != inside:
                    streak += 1
                    if streak == inertia:
                        inside, streak = now, 0
                        if now:
                            entered, loitered = (frame - 1) / frame_rate, False
                            events.append({"type": "zone_enter", "frame": frame, "track": track, "zone": zone["name"]})
                        else:
                            events.append({"type": "zone_exit", "frame": frame, "track": track, "zone": zone["name"]})
                else:
                    streak = 0
                if inside and loiter is not None and not loitered and (frame - 1) / frame_rate - entered >= loiter:
                    loitered = True
                    events.append({"type": "loitering", "frame": frame, "track": track, "zone": zone["name"]})
        for line in lines:
            a, b = line["from"], line["to"]
            committed = None
            pending = None
            previous = None
            for frame, p in observations:
                s = "R" if side_value(a, b, p) > 0 else "L"
                if committed is None:
                    committed = s
                elif pending is None:
                    if s != committed:
                        pending = (s, segments_intersect(previous, p, a, b))
                else:
                    if s == pending[0]:
                        if pending[1]:
                            events.append({"type": "line_cross", "frame": frame, "track": track, "line": line["name"],
                                           "direction": "in" if committed == "L" else "out"})
                        committed = s
                    pending = None
                previous = p
    return sorted(events, key=lambda e: (e["frame"], json.dumps(e, sort_keys=True)))


# ---- Running Spotter ---------------------------------------------------------------------------

def write_detections(path, objects, frames):
    """objects: {name: {frame: (cx, bottom, w, h)}}; every box scores 0.9."""
    with open(path, "w") as f:
        for frame in range(1, frames + 1):
            for boxes in objects.values():
                if frame in boxes:
                    cx, bottom, w, h = boxes[frame]
                    f.write(f"{frame},-1,{cx - w / 2:.2f},{bottom - h:.2f},{w:.2f},{h:.2f},0.9,-1,-1,-1\n")


def run_case(spotter, work, name, objects, frames, layout, frame_rate=25, extra=()):
    det = os.path.join(work, f"{name}-det.txt")
    out = os.path.join(work, f"{name}-out.txt")
    zones = os.path.join(work, f"{name}-zones.json")
    events = os.path.join(work, f"{name}-events.jsonl")
    write_detections(det, objects, frames)
    json.dump(layout, open(zones, "w"))
    result = subprocess.run([spotter, "track", det, "--output", out, "--zones", zones, "--events", events,
                             "--frame-rate", str(frame_rate), *extra], capture_output=True, text=True)
    check(result.returncode == 0, f"{name}: spotter track failed: {result.stderr.strip()}")
    if result.returncode != 0:
        return [], []
    rows = []
    for line in open(out):
        parts = line.strip().split(",")
        rows.append((int(parts[0]), int(parts[1]), *map(float, parts[2:6])))
    got = [json.loads(line) for line in open(events) if line.strip()]
    pixel_layout = layout
    if layout.get("normalized"):
        width, height = map(int, [v for v in extra if "x" in v][0].split("x"))
        pixel_layout = {
            "zones": [dict(z, polygon=[[x * width, y * height] for x, y in z["polygon"]]) for z in layout.get("zones", [])],
            "lines": [dict(l, **{"from": [l["from"][0] * width, l["from"][1] * height], "to": [l["to"][0] * width, l["to"][1] * height]})
                      for l in layout.get("lines", [])],
        }
    want = expected_events(rows, pixel_layout, frame_rate)
    frames_in_order = [e["frame"] for e in got]
    check(frames_in_order == sorted(frames_in_order), f"{name}: events are not in frame order")
    got_sorted = sorted(got, key=lambda e: (e["frame"], json.dumps(e, sort_keys=True)))
    check(got_sorted == want, f"{name}: events differ from the contract\n  spotter:  {got_sorted}\n  expected: {want}")
    return got, rows


def path(points, frames_per_leg):
    """Straight legs between points (cx, bottom), one box per frame, starting at frame 1."""
    out = {}
    frame = 1
    for (x1, y1), (x2, y2) in zip(points, points[1:]):
        for i in range(frames_per_leg):
            t = i / frames_per_leg
            out[frame] = (x1 + (x2 - x1) * t, y1 + (y2 - y1) * t)
            frame += 1
    out[frame] = points[-1]
    return out


def boxes(track, w=40, h=100, start=0):
    return {frame + start: (cx, bottom, w, h) for frame, (cx, bottom) in track.items()}


def types(events, kind):
    return [e for e in events if e["type"] == kind]


def main():
    spotter = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="spotter-zones-")
    gate = {"name": "gate", "from": [300, 0], "to": [300, 480]}

    # 1. Back and forth over a line drawn downwards at x = 300: its right-hand side (walking from
    # `from` to `to`, y down) is x < 300, so left to right on screen is R -> L, `out`, then `in`, `out`.
    walk = path([(200, 300), (400, 300), (200, 300), (400, 300)], 20)
    got, _ = run_case(spotter, work, "back-and-forth", {"a": boxes(walk)}, max(walk), {"lines": [gate]})
    crossings = types(got, "line_cross")
    check([e["direction"] for e in crossings] == ["out", "in", "out"], f"back-and-forth: three crossings out, in, out: {crossings}")

    # 2. Going over and straight back (one observation on the other side) counts nothing.
    hop = {f: (290, 300) for f in range(1, 11)}
    hop[11] = (310, 300)
    hop.update({f: (290, 300) for f in range(12, 21)})
    got, _ = run_case(spotter, work, "hop-back", {"a": boxes(hop)}, 20, {"lines": [gate]})
    check(types(got, "line_cross") == [], f"hop-back: no crossing: {got}")

    # 3. Passing beyond the segment's end changes side without a crossing.
    short = {"name": "short", "from": [300, 200], "to": [300, 260]}
    beyond = path([(200, 400), (400, 400)], 20)
    got, _ = run_case(spotter, work, "beyond-end", {"a": boxes(beyond)}, max(beyond), {"lines": [short]})
    check(types(got, "line_cross") == [], f"beyond-end: no crossing past the segment's end: {got}")

    # 4. Touching a zone's edge counts as inside; inertia 3 enters on the third observation.
    door = {"name": "door", "polygon": [[100, 200], [300, 200], [300, 400], [100, 400]]}
    touch = {f: (300, 300) for f in range(1, 8)}  # on the right edge
    touch.update({f: (300 + 10 * (f - 7), 300) for f in range(8, 15)})
    got, _ = run_case(spotter, work, "edge", {"a": boxes(touch)}, 14, {"zones": [door]})
    check([(e["type"], e["frame"]) for e in got] == [("zone_enter", 3), ("zone_exit", 10)], f"edge: enter at 3, exit at 10: {got}")

    # 5. A gap of missed frames neither counts nor resets: two observations inside, a gap, one more enters.
    gap = {1: (90, 300), 2: (95, 300), 3: (100, 300), 4: (105, 300)}
    gap.update({f: (85 + 5 * f, 300) for f in range(9, 16)})
    got, rows = run_case(spotter, work, "gap", {"a": boxes(gap)}, 15, {"zones": [door]})
    check(len({r[1] for r in rows}) == 1, f"gap: one track across the gap: {sorted({r[1] for r in rows})}")
    check([(e["type"], e["frame"]) for e in got] == [("zone_enter", 9)], f"gap: enter at frame 9 (the third observation inside): {got}")

    # 6. Two objects passing each other over the line, in opposite directions.
    a = path([(150, 300), (450, 300)], 40)
    b = path([(450, 420), (150, 420)], 40)
    got, rows = run_case(spotter, work, "passing", {"a": boxes(a), "b": boxes(b)}, 41, {"lines": [gate]})
    directions = sorted(e["direction"] for e in types(got, "line_cross"))
    check(directions == ["in", "out"], f"passing: one in and one out: {got}")

    # 7. A stationary object inside a zone: enters once, loiters once, never leaves.
    still = {f: (200, 300) for f in range(1, 101)}
    loiter_zone = dict(door, loitering_seconds=1.99)
    got, _ = run_case(spotter, work, "stationary", {"a": boxes(still)}, 100, {"zones": [loiter_zone]})
    check([(e["type"], e["frame"]) for e in got] == [("zone_enter", 3), ("loitering", 53)], f"stationary: enter at 3, loitering at 53: {got}")

    # 8. A track that stops being reported emits no exit.
    vanish = {f: (200, 300) for f in range(1, 11)}
    got, _ = run_case(spotter, work, "vanish", {"a": boxes(vanish)}, 60, {"zones": [door]})
    check(types(got, "zone_exit") == [], f"vanish: no exit: {got}")

    # 9. Normalized coordinates with --frame-size.
    normalized = {"normalized": True, "zones": [{"name": "left", "polygon": [[0, 0], [0.5, 0], [0.5, 1], [0, 1]]}],
                  "lines": [{"name": "mid", "from": [0.5, 0], "to": [0.5, 1]}]}
    across = path([(100, 300), (500, 300)], 30)
    got, _ = run_case(spotter, work, "normalized", {"a": boxes(across)}, max(across), normalized, extra=("--frame-size", "640x480"))
    check([e["type"] for e in got] == ["zone_enter", "line_cross", "zone_exit"] and types(got, "line_cross")[0]["direction"] == "out",
          f"normalized: enter, cross out, exit: {got}")

    # 10. A self-intersecting polygon (a bow tie): its middle crossing is outside by the even-odd rule.
    bowtie = {"name": "bowtie", "polygon": [[100, 100], [500, 400], [500, 100], [100, 400]]}
    diagonal = path([(120, 250), (480, 250)], 36)
    run_case(spotter, work, "bowtie", {"a": boxes(diagonal)}, max(diagonal), {"zones": [dict(bowtie, inertia=1)]})

    # 11. Random walks of several objects over zones and lines of random shapes.
    rng = random.Random(33)
    for case in range(12):
        objects = {}
        for k in range(rng.randint(1, 4)):
            x, y = rng.uniform(50, 590), rng.uniform(150, 470)
            vx, vy = rng.uniform(-8, 8), rng.uniform(-5, 5)
            start = rng.randint(1, 20)
            track = {}
            for f in range(start, start + rng.randint(30, 120)):
                if rng.random() < 0.08:
                    continue  # a missed frame
                x, y = x + vx + rng.gauss(0, 1), y + vy + rng.gauss(0, 1)
                track[f] = (round(x, 2), round(y, 2), 40, 100)
            objects[k] = track
        layout = {
            "zones": [{"name": f"z{i}", "inertia": rng.randint(1, 4),
                       "polygon": [[round(rng.uniform(0, 640), 1), round(rng.uniform(100, 480), 1)] for _ in range(rng.randint(3, 7))]}
                      for i in range(rng.randint(1, 3))],
            "lines": [{"name": f"l{i}", "from": [round(rng.uniform(0, 640)), round(rng.uniform(0, 480))],
                       "to": [round(rng.uniform(0, 640)), round(rng.uniform(0, 480))]} for i in range(rng.randint(1, 3))],
        }
        run_case(spotter, work, f"random-{case}", objects, 150, layout)

    # 12. Bad zones files are refused with a message.
    bad = os.path.join(work, "bad.json")
    det = os.path.join(work, "back-and-forth-det.txt")
    for content, words in [('{"zones": [{"name": "a", "polygon": [[0, 0], [1, 1]]}]}', "3 to"),
                           ('{"lines": [{"name": "a", "from": [0, 0], "to": [0, 0]}]}', "differ"),
                           ('{"zones": [{"polygon": [[0, 0], [1, 1], [2, 0]]}]}', "name"),
                           ('not json', "zones file"),
                           ('{"normalized": true, "zones": [{"name": "a", "polygon": [[0, 0], [2, 1], [1, 0]]}]}', "between 0 and 1")]:
        open(bad, "w").write(content)
        result = subprocess.run([spotter, "track", det, "--output", os.path.join(work, "x.txt"), "--zones", bad, "--events",
                                 os.path.join(work, "x.jsonl")], capture_output=True, text=True)
        check(result.returncode != 0 and words in result.stderr, f"bad zones {content!r}: refused mentioning {words!r}: {result.stderr.strip()}")

    print(f"{CHECKS - len(FAILURES)}/{CHECKS} zone checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
