#!/usr/bin/env python3
"""The server's JSON answers, events and webhooks against the schemas of its own OpenAPI document
(issue 33: one shape per concept, documented once), with a real `spotter serve` on 127.0.0.1:

- every event of a tracked source with a zone and a line (SSE), and every webhook body, is an
  `Event`; the run must produce detections, object_started/updated/ended, zone_enter, line_cross,
  clip_started and clip_finished, so each of their schemas is exercised;
- the answers of GET/POST/PATCH sources, the album (page and clip), counts and /api/v1/detect
  match the schema their operation names; an ended object's snapshot_url answers a JPEG;
- the schemas are closed where the concept is (Box, Detection, Clip): a stray or missing field fails.

Usage: check_openapi.py SPOTTER_BINARY
"""
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import jsonschema

from checklib import MODEL, SHARED, check, free_port, summary, surest_picture

VIDEO = os.path.join(SHARED, "videos", "one-by-one-person-detection.mp4")
PICTURE = surest_picture()[0]


def request(base, path, body=None, method=None, content_type="application/json"):
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": content_type}, method=method)
    with urllib.request.urlopen(req, timeout=30) as response:
        return response.status, json.loads(response.read() or b"null")


class Schemas:
    def __init__(self, document):
        self.document = document

    def errors(self, schema, value):
        validator = jsonschema.Draft202012Validator({**schema, "components": self.document["components"]})
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in validator.iter_errors(value)][:3]

    def named(self, name):
        return {"$ref": f"#/components/schemas/{name}"}

    def answer(self, path, method, status):
        """The schema the document gives for this operation's JSON answer."""
        response = self.document["paths"][path][method]["responses"][str(status)]
        return response["content"]["application/json"]["schema"]


def main():
    spotter = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="spotter-openapi-")
    hooks = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            hooks.append((self.headers.get("X-Spotter-Event"), json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([spotter, "serve", "--album", os.path.join(work, "album"), "--port", str(port), "--model", MODEL,
                               "--media-dir", os.path.dirname(VIDEO), "--webhook", f"http://127.0.0.1:{hook.server_address[1]}/hook"],
                              stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        document = json.load(urllib.request.urlopen(base + "/api/v1/openapi.json"))
        schemas = Schemas(document)
        check("the document names its JSON shapes", {"Detection", "Box", "Clip", "Event", "SourceStatus", "Counts", "ZoneLayout"}
              <= document["components"]["schemas"].keys(), document["components"].get("schemas", {}).keys())

        events = []

        def follow():
            try:
                for line in urllib.request.urlopen(base + "/api/v1/events", timeout=300):
                    if line.startswith(b"data: "):
                        events.append(json.loads(line[6:]))
            except Exception:
                pass

        threading.Thread(target=follow, daemon=True).start()
        time.sleep(0.5)
        layout = {"zones": [{"name": "door", "polygon": [[520, 200], [760, 200], [760, 430], [520, 430]]}],
                  "lines": [{"name": "gate", "from": [500, 10], "to": [500, 425]}]}
        status, added = request(base, "/api/v1/sources", {"input": VIDEO, "zones": layout})
        errors = schemas.errors(schemas.answer("/api/v1/sources", "post", 201), added)
        check("POST /api/v1/sources answers a SourceStatus", status == 201 and not errors, errors)
        source = added["id"]
        deadline = time.time() + 240
        statuses = []
        while time.time() < deadline:
            statuses.append(request(base, f"/api/v1/sources/{source}")[1])
            if statuses[-1]["state"] in ("finished", "failed"):
                break
            time.sleep(1)
        errors = [e for s in statuses for e in schemas.errors(schemas.answer("/api/v1/sources/{id}", "get", 200), s)]
        check(f"every GET /api/v1/sources/ID while it runs is a SourceStatus ({len(statuses)})", statuses and statuses[-1]["state"] == "finished"
              and not errors, errors or statuses[-1])
        ended = [e for e in events if e["type"] == "object_ended" and "snapshot_url" in e]
        jpeg = urllib.request.urlopen(ended[-1]["snapshot_url"], timeout=10).read() if ended else b""
        check("an ended object's snapshot_url answers its JPEG", jpeg[:3] == b"\xff\xd8\xff", ended[-1:])
        _, listed = request(base, "/api/v1/sources")
        errors = schemas.errors(schemas.answer("/api/v1/sources", "get", 200), listed)
        check("GET /api/v1/sources is a SourceList", not errors, errors)
        status, patched = request(base, f"/api/v1/sources/{source}", {"stationary_seconds": 20, "motion": True}, method="PATCH")
        errors = schemas.errors(schemas.answer("/api/v1/sources/{id}", "patch", 200), patched)
        check("PATCH answers a SourceStatus with the change", not errors and patched["stationary_seconds"] == 20 and patched["motion"] is True,
              errors or patched)

        _, page = request(base, "/api/v1/album")
        errors = schemas.errors(schemas.answer("/api/v1/album", "get", 200), page)
        check(f"GET /api/v1/album is an AlbumPage ({len(page['clips'])} clips, with objects)",
              not errors and page["clips"] and all(c["objects"] for c in page["clips"]), errors or page)
        _, clip = request(base, f"/api/v1/album/{page['clips'][0]['id']}")
        errors = schemas.errors(schemas.answer("/api/v1/album/{id}", "get", 200), clip)
        check("GET /api/v1/album/ID is a Clip", not errors, errors)
        _, counts = request(base, f"/api/v1/counts?source={source}")
        errors = schemas.errors(schemas.answer("/api/v1/counts", "get", 200), counts)
        kinds = {(c["kind"], c["name"], c.get("direction")) for c in counts["counts"]}
        check(f"GET /api/v1/counts is Counts, with the zone's entries and the line's crossings {sorted(kinds, key=str)}",
              not errors and ("zone", "door", None) in kinds and ("line", "gate", "out") in kinds, errors or counts)
        status, picture = request(base, "/api/v1/detect", open(PICTURE, "rb").read(), content_type="image/png")
        errors = schemas.errors(schemas.answer("/api/v1/detect", "post", 200), picture)
        check("POST /api/v1/detect answers a PictureResult", not errors and picture["detections"], errors or picture)

        time.sleep(1)
        types = {}
        bad = []
        for event in events:
            types[event["type"]] = types.get(event["type"], 0) + 1
            errors = schemas.errors(schemas.named("Event"), event)
            if errors and len(bad) < 3:
                bad.append((event["type"], errors))
        wanted = {"detection", "object_started", "object_updated", "object_ended", "zone_enter", "line_cross", "clip_started", "clip_finished"}
        check(f"every one of {len(events)} events is an Event: {types}", events and not bad and wanted <= types.keys(), bad or types)
        tracked = [d for e in events if e["type"] == "detection" for d in e["detections"]]
        check("the detections of a tracked source carry track and stationary", tracked and all("track" in d for d in tracked if "stationary" in d)
              and any("track" in d for d in tracked))
        bad = [(kind, schemas.errors(schemas.named("Event"), body)) for kind, body in hooks]
        bad = [b for b in bad if b[1]]
        hook_types = {kind for kind, _ in hooks}
        check(f"every one of {len(hooks)} webhook bodies is an Event named by X-Spotter-Event ({sorted(hook_types)})",
              hooks and not bad and all(kind == body["type"] for kind, body in hooks) and "clip_finished" in hook_types, bad[:3])
        stray = dict(page["clips"][0], extra=1)
        check("a stray field fails the Clip schema (the schemas are closed)", schemas.errors(schemas.named("Clip"), stray))
        box = {k: v for k, v in picture["detections"][0]["box"].items() if k != "ymax"}
        check("a missing field fails the Box schema", schemas.errors(schemas.named("Box"), box))
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
        hook.shutdown()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
