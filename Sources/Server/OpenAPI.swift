import Foundation

/// The OpenAPI 3.1 description of the server's API, served at `/api/v1/openapi.json`; the router
/// tests call every operation it lists and check the answer against its documented statuses.
enum OpenAPI {
    static let document = written()

    /// Built once, on the first request for the document, so it is left unoptimized: the
    /// optimizer's copy-on-write pass took 97 of the module's 128 s on this one literal (Swift 6.3,
    /// `-Xllvm -sil-print-pass-name`), the longest step of a clean release build; 29 s without.
    @_optimize(none)
    private static func written() -> String {
        func response(_ description: String, _ type: String? = "application/json", schema: String? = nil) -> [String: Any] {
            var object: [String: Any] = ["description": description]
            if let type {
                let body: [String: Any] = schema.map { ["$ref": "#/components/schemas/\($0)"] } ?? ["type": type == "application/json" ? "object" : "string"]
                object["content"] = [type: ["schema": body]]
            }
            return object
        }
        let error = response("an error: {\"error\": {\"status\", \"message\"}}")
        let unauthorized = response("a token is required and was not given")
        func parameter(_ name: String, _ location: String, _ type: String, _ description: String, required: Bool = false) -> [String: Any] {
            ["name": name, "in": location, "required": required || location == "path", "description": description, "schema": ["type": type]]
        }
        let picture: [String: Any] = [
            "required": true,
            "content": [
                "image/jpeg": ["schema": ["type": "string", "format": "binary"]],
                "image/png": ["schema": ["type": "string", "format": "binary"]],
                "multipart/form-data": ["schema": ["type": "object", "properties": ["image": ["type": "string", "format": "binary"]]]],
            ],
        ]
        let detectParameters = [
            parameter("threshold", "query", "number", "minimum score, 0...1 (default 0.5; DeepStack's min_confidence also works)"),
            parameter("classes", "query", "string", "comma-separated labels to keep, e.g. person,car"),
        ]
        let sourceID = parameter("id", "path", "string", "source id, e.g. s1")
        let paths: [String: Any] = [
            "/live": ["get": ["summary": "Live view: every source's picture with boxes, recording indicator, fps and latency",
                              "parameters": [parameter("source", "query", "string", "show only this source")],
                              "responses": ["200": response("HTML page", "text/html"), "401": unauthorized]]],
            "/api/v1/sources": [
                "get": ["summary": "Sources and their status", "responses": ["200": response("{\"sources\": [status]}", schema: "SourceList"), "401": unauthorized]],
                "post": ["summary": "Add a source: a camera, stream, file or sample",
                         "requestBody": ["required": true, "content": ["application/json": ["schema": ["$ref": "#/components/schemas/SourceSpec"]]]],
                         "responses": ["201": response("the source's status, with its id", schema: "SourceStatus"), "400": error, "409": error, "413": error, "415": error,
                                       "503": error, "401": unauthorized]],
            ],
            "/api/v1/sources/{id}": [
                "get": ["summary": "One source's status: state (opening, waiting, running, reconnecting, paused, finished, stopped, failed) and its message, origin (api or config), settings, fps, inference ms, dropped frames, recording, progress of files",
                        "parameters": [sourceID], "responses": ["200": response("status", schema: "SourceStatus"), "404": error, "401": unauthorized]],
                "delete": ["summary": "Stop and remove a source (its open clip is finished and indexed); it is not started again after a restart",
                           "parameters": [sourceID], "responses": ["204": response("removed", nil), "404": error, "507": error, "401": unauthorized]],
                "patch": ["summary": "Change a source's settings (any of record, classes, threshold, realtime, loop, trigger, rectangles, paused, rtsp_transport, zones, required_zones, motion, motion_masks, stationary_seconds): it restarts with them under the same id (a file already read to the end stays finished); kept across restarts",
                          "parameters": [sourceID],
                          "requestBody": ["required": true, "content": ["application/json": ["schema": ["$ref": "#/components/schemas/SourcePatch"]]]],
                          "responses": ["200": response("the source's status", schema: "SourceStatus"), "400": error, "404": error, "415": error, "507": error,
                                        "401": unauthorized]],
            ],
            "/api/v1/sources/{id}/snapshot.jpg": ["get": [
                "summary": "The source's latest frame as JPEG",
                "parameters": [sourceID, parameter("boxes", "query", "boolean", "draw the boxes (default true)")],
                "responses": ["200": response("JPEG", "image/jpeg"), "404": error, "401": unauthorized],
            ]],
            "/api/v1/sources/{id}/frames/{name}": ["get": [
                "summary": "One of the source's last frames (N.jpg, N from its detection event), encoded once for every viewer",
                "parameters": [sourceID, parameter("name", "path", "string", "N.jpg"), parameter("boxes", "query", "boolean", "draw the boxes (default false)")],
                "responses": ["200": response("JPEG", "image/jpeg"), "400": error, "404": error, "401": unauthorized],
            ]],
            "/api/v1/sources/{id}/objects/{track}/snapshot.jpg": ["get": [
                "summary": "The best detection of an ended object (its object_ended event's snapshot_url; the last 64 per source)",
                "parameters": [sourceID, parameter("track", "path", "integer", "the object's track id")],
                "responses": ["200": response("JPEG", "image/jpeg"), "400": error, "404": error, "401": unauthorized],
            ]],
            "/api/v1/counts": ["get": [
                "summary": "Zone entries and line crossings (per direction) per hour, kept in the album's index",
                "parameters": [parameter("source", "query", "string", "only this source"),
                               parameter("from", "query", "string", "hours from (ISO 8601; default 24 hours ago)"),
                               parameter("to", "query", "string", "hours before (ISO 8601)")],
                "responses": ["200": response("counts per source, hour, zone or line and direction", schema: "Counts"), "400": error, "401": unauthorized],
            ]],
            "/samples": ["get": ["summary": "Demo videos: download with progress, then process",
                                 "responses": ["200": response("HTML page", "text/html"), "401": unauthorized]]],
            "/api/v1/samples": ["get": [
                "summary": "The catalog's sample videos: name, summary, size, cached, download progress",
                "responses": ["200": response("{\"samples\": [{name, summary, license, size, cached, downloading, progress}]}"), "401": unauthorized],
            ]],
            "/api/v1/samples/{name}/pull": ["post": [
                "summary": "Download a sample into the cache; progress comes as download_progress events",
                "parameters": [parameter("name", "path", "string", "sample name")],
                "responses": ["200": response("already cached"), "202": response("downloading"), "404": error, "401": unauthorized],
            ]],
            "/api/v1/uploads": ["post": [
                "summary": "Upload a video to process (raw body, streamed to disk); then POST /api/v1/sources with its path",
                "parameters": [parameter("name", "query", "string", "file name to keep (letters, digits, -_)")],
                "requestBody": ["required": true, "content": ["application/octet-stream": ["schema": ["type": "string", "format": "binary"]]]],
                "responses": ["201": response("{path, name, size, container}"), "400": error, "413": error, "415": error, "503": error,
                              "507": error, "401": unauthorized],
            ]],
            "/api/v1/events": ["get": [
                "summary": "Server-Sent Events (schema Event): detection (a frame's analysis), object_started, object_updated, object_ended, zone_enter, zone_exit, loitering, line_cross, clip_started, clip_finished, source_state, source_stats, job_progress, source_added, source_changed, source_removed, clip_deleted, download_progress, download_finished, download_failed",
                "parameters": [parameter("source", "query", "string", "only this source's events"),
                               parameter("types", "query", "string", "comma-separated event types to keep")],
                "responses": ["200": response("an endless event stream: `event: TYPE` and `data: JSON` (an Event) per event", "text/event-stream"), "401": unauthorized],
            ]],
            "/api/v1/live": ["get": [
                "summary": "The live view's stream: one line of JSON per event (the same events as /api/v1/events); a detection line carries jpeg_bytes, and that many bytes of its frame's JPEG follow the line. A slow reader skips to the newest frame",
                "parameters": [parameter("sources", "query", "string", "comma-separated source ids (default: every source)"),
                               parameter("types", "query", "string", "comma-separated event types to keep"),
                               parameter("local", "query", "string", "1: only the sources this node runs (in a cluster, what another node's relay reads)")],
                "responses": ["200": response("an endless stream", EventHub.liveContentType), "401": unauthorized],
            ]],
            "/health": ["get": ["summary": "Liveness", "responses": ["200": response("the server is up")]]],
            "/api/v1/health": ["get": ["summary": "Liveness", "responses": ["200": response("the server is up")]]],
            "/api/v1/openapi.json": ["get": ["summary": "This document", "responses": ["200": response("OpenAPI 3.1")]]],
            "/metrics": ["get": ["summary": "Prometheus metrics", "responses": ["200": response("text exposition format", "text/plain"), "401": unauthorized]]],
            "/api/v1/album": ["get": [
                "summary": "Clips, newest first",
                "parameters": [
                    parameter("source", "query", "string", "only clips of this source"),
                    parameter("label", "query", "string", "only clips with this label"),
                    parameter("from", "query", "string", "created at or after (ISO 8601, e.g. 2026-11-22)"),
                    parameter("to", "query", "string", "created before (ISO 8601)"),
                    parameter("before", "query", "integer", "page: clips with an id below this"),
                    parameter("limit", "query", "integer", "page size, 1...500 (default 50)"),
                ],
                "responses": ["200": response("a page of clips, newest first, and the next page's URL (null on the last)", schema: "AlbumPage"),
                              "400": error, "401": unauthorized],
            ]],
            "/api/v1/album/{id}": [
                "get": ["summary": "One clip", "parameters": [parameter("id", "path", "integer", "clip id")],
                        "responses": ["200": response("the clip", schema: "Clip"), "404": error, "401": unauthorized]],
                "delete": ["summary": "Delete a clip, its thumbnail and its index row", "parameters": [parameter("id", "path", "integer", "clip id")],
                           "responses": ["204": response("deleted", nil), "404": error, "409": error, "401": unauthorized]],
            ],
            "/media/clips/{name}": [
                "get": ["summary": "A clip file (H.264 MP4), with byte ranges",
                        "parameters": [parameter("name", "path", "string", "file name"), parameter("Range", "header", "string", "bytes=A-B, bytes=A- or bytes=-N")],
                        "responses": ["200": response("the whole file", "video/mp4"), "206": response("the requested bytes", "video/mp4"),
                                      "400": error, "404": error, "416": error, "401": unauthorized]],
                "head": ["summary": "A clip file's size and range support", "parameters": [parameter("name", "path", "string", "file name")],
                         "responses": ["200": response("headers only", nil), "404": error, "401": unauthorized]],
            ],
            "/media/thumbnails/{name}": ["get": [
                "summary": "A thumbnail (320 px) or full-size snapshot (-full.jpg)",
                "parameters": [parameter("name", "path", "string", "file name")],
                "responses": ["200": response("JPEG", "image/jpeg"), "206": response("the requested bytes", "image/jpeg"), "400": error, "404": error,
                              "416": error, "401": unauthorized],
            ]],
            "/api/v1/detect": ["post": [
                "summary": "Detect objects in a picture: the object `spotter detect --json` prints",
                "parameters": detectParameters, "requestBody": picture,
                "responses": ["200": response("the picture's detections", schema: "PictureResult"),
                              "400": error, "413": error, "415": error, "422": error, "503": error, "401": unauthorized],
            ]],
            "/v1/vision/detection": ["post": [
                "summary": "DeepStack-compatible detection (Frigate, Home Assistant, Blue Iris)",
                "parameters": detectParameters, "requestBody": picture,
                "responses": ["200": response("{success, predictions: [{label, confidence, x_min, y_min, x_max, y_max, userid (serve --faces: a name or unknown)}], duration}"),
                              "400": error, "413": error, "415": error, "422": error, "503": error, "401": unauthorized],
            ]],
        ]
        // Every operation may meet the access checks (``AccessMiddleware``): a foreign Host (421),
        // and for changes a foreign Origin (403) or too many wrong tokens (429).
        var checked: [String: Any] = [:]
        for (path, operations) in paths {
            var operations = operations as! [String: [String: Any]]
            for (method, var operation) in operations {
                var responses = operation["responses"] as! [String: Any]
                responses["421"] = response("the Host header names another server")
                if method != "get" && method != "head" { responses["403"] = response("a change from another origin") }
                if responses["401"] != nil { responses["429"] = response("too many wrong tokens from this address; see Retry-After") }
                operation["responses"] = responses
                operations[method] = operation
            }
            checked[path] = operations
        }

        // The JSON shapes, one per concept (the Swift types that encode them are named alike).
        func object(_ properties: [String: Any], required: [String], closed: Bool = true) -> [String: Any] {
            var schema: [String: Any] = ["type": "object", "properties": properties, "required": required]
            if closed { schema["additionalProperties"] = false }
            return schema
        }
        func ref(_ name: String) -> [String: Any] { ["$ref": "#/components/schemas/\(name)"] }
        func array(_ items: [String: Any]) -> [String: Any] { ["type": "array", "items": items] }
        let number: [String: Any] = ["type": "number"], integer: [String: Any] = ["type": "integer"]
        let string: [String: Any] = ["type": "string"], boolean: [String: Any] = ["type": "boolean"]
        let nullableString: [String: Any] = ["type": ["string", "null"]]
        let point = ["type": "array", "items": number, "minItems": 2, "maxItems": 2] as [String: Any]
        let score: [String: Any] = ["type": "number", "minimum": 0, "maximum": 1]
        let sourceSettings: [String: Any] = [
            "input": ["type": "string", "description": "file, rtsp/http(s)/tcp/udp/hls URL, /dev/videoN or sample name"],
            "record": ["type": "boolean", "description": "record clips into the album (default true)"],
            "classes": ["type": "array", "items": string, "description": "labels to detect and record (default the server's --classes, else [\"person\"]; [] for all)"],
            "threshold": ["type": "number", "description": "lowest score, 0.05...1 (default the server's --threshold, else 0.5)"],
            "realtime": ["type": "boolean", "description": "play a file at its own pace, as a camera (default false: a job as fast as possible)"],
            "trigger": ["type": "string", "enum": ["detection", "unknown-face"],
                        "description": "what records: a tracked object of classes (default), or a stranger's face (serve --faces)"],
            "loop": ["type": "boolean", "description": "start a file again at its end (default false)"],
            "rectangles": ["type": "boolean", "description": "also find rectangles (pages, cards, screens) on every frame: in detection events as rectangles, outlined in the live view and snapshots (default false)"],
            "rtsp_transport": ["type": "string", "enum": ["tcp", "udp"], "description": "RTSP over TCP (default) or UDP"],
            "zones": ref("ZoneLayout"),
            "required_zones": ["type": "array", "items": string, "description": "a clip opens only for objects inside one of these zones"],
            "motion": ["type": "boolean", "description": "skip inference on frames where nothing moves (default true for live inputs, false for files)"],
            "motion_masks": ["type": "array", "items": array(point), "description": "polygons (source pixels) where motion is ignored"],
            "stationary_seconds": ["type": "number", "description": "seconds an object stays in place to be stationary (default 10)"],
        ]
        var patchSettings = sourceSettings
        patchSettings["paused"] = ["type": "boolean", "description": "stop reading the source, keeping it"]
        patchSettings["input"] = nil
        let objectFields: [String: Any] = [
            "track": integer, "label": string, "class_id": integer, "first_t": number, "last_t": number, "score": score, "box": ref("Box"),
            "best_score": score, "best_t": number, "stationary": boolean, "zones": array(string),
            "snapshot_url": ["type": "string", "description": "object_ended on the server: its best detection's JPEG"],
        ]
        let placed: [String: Any] = ["source": string, "t": number, "frame": integer]
        func event(_ types: [String], _ fields: [String: Any], required: [String]) -> [String: Any] {
            object(fields.merging(placed) { a, _ in a }.merging(["type": ["enum": types]]) { a, _ in a }, required: ["type"] + required)
        }
        let schemas: [String: Any] = [
            "Box": object(["xmin": number, "ymin": number, "xmax": number, "ymax": number], required: ["xmin", "ymin", "xmax", "ymax"]),
            "Detection": object([
                "label": string, "class_id": integer, "score": score, "box": ref("Box"),
                "keypoints": ["type": "array", "items": point, "description": "face landmarks (BlazeFace)"],
                "identity": object(["name": nullableString, "distance": ["type": ["number", "null"]]], required: ["name", "distance"]),
                "track": ["type": "integer", "minimum": 1, "description": "the tracked object's id (tracked streams)"],
                "stationary": boolean,
            ], required: ["label", "class_id", "score", "box"]),
            "Rectangle": object(["corners": array(point), "normalized": array(point), "box": ref("Box"), "confidence": number],
                                required: ["corners", "normalized", "box", "confidence"]),
            "PictureResult": object([
                "image": string, "width": integer, "height": integer, "detections": array(ref("Detection")),
                "timings_ms": ["type": "object", "additionalProperties": number],
                "rectangles": array(ref("Rectangle")),
            ], required: ["image", "width", "height", "detections", "timings_ms"]),
            "ZoneLayout": object([
                "zones": array(object(["name": string, "polygon": array(point), "inertia": integer, "loitering_seconds": number], required: ["name", "polygon"])),
                "lines": array(object(["name": string, "from": point, "to": point], required: ["name", "from", "to"])),
                "normalized": ["type": "boolean", "description": "coordinates are fractions 0...1 of the frame (default false: pixels)"],
            ], required: []),
            "SourceSpec": object(sourceSettings, required: ["input"]),
            "SourcePatch": object(patchSettings, required: []),
            "SourceStatus": object(sourceSettings.merging([
                "id": string, "kind": ["enum": ["file", "live", "sample"]], "origin": ["enum": ["api", "config"]],
                "state": ["enum": ["opening", "waiting", "running", "reconnecting", "paused", "finished", "stopped", "failed"]],
                "message": string, "paused": boolean, "recording": boolean, "frames": integer, "received": integer, "processed": integer,
                "analyzed": integer, "skipped": integer, "dropped": integer, "objects": integer, "clips": integer,
                "fps": number, "inference_ms": number, "snapshot_url": string, "album_source": string,
                "width": integer, "height": integer,
                "finished_at": ["type": "string", "description": "when a file source was read to the end (UTC, ISO 8601): it is not read again, at a restart or when its settings change; add the file again to read it again"],
            ]) { a, _ in a }, required: ["id", "input", "kind", "origin", "state", "frames", "analyzed", "skipped", "dropped"], closed: false),
            "SourceList": object(["sources": array(ref("SourceStatus"))], required: ["sources"]),
            "ClipObject": object(["track": integer, "label": string, "first_t": number, "last_t": number, "best_score": score, "best_t": number],
                                 required: ["track", "label", "first_t", "last_t", "best_score", "best_t"]),
            "Clip": object([
                "id": integer, "source": string, "start": number, "end": number, "duration": number, "frames": integer,
                "labels": array(string), "best_score": number, "incomplete": boolean, "created_at": string,
                "started_at": nullableString, "ended_at": nullableString, "objects": array(ref("ClipObject")),
                "url": string, "thumbnail_url": string, "snapshot_url": string,
                "source_id": string, "node": string, "generation": integer,
            ], required: ["id", "source", "start", "end", "duration", "frames", "labels", "best_score", "incomplete", "created_at", "objects", "url"]),
            "AlbumPage": object(["clips": array(ref("Clip")), "next": nullableString], required: ["clips", "next"]),
            "Counts": object([
                "from": string, "to": nullableString,
                "counts": array(object([
                    "source": string, "hour": ["type": "string", "description": "the hour's start, ISO 8601 UTC"],
                    "kind": ["enum": ["zone", "line"]], "name": string,
                    "direction": ["enum": ["in", "out"], "description": "lines only"], "count": integer,
                ], required: ["source", "hour", "kind", "name", "count"])),
            ], required: ["from", "to", "counts"]),
            "Event": ["oneOf": [
                event(["detection"], [
                    "analyzed": ["type": "boolean", "description": "false: motion gating skipped inference; the tracks' boxes are shown"],
                    "detections": array(ref("Detection")), "rectangles": array(ref("Rectangle")),
                    "zones": array(object(["name": string, "tracks": array(integer)], required: ["name", "tracks"])),
                    "width": integer, "height": integer, "decoded_at": ["type": "integer", "description": "ms since 1970"],
                    "image_url": string, "inference_ms": number, "jpeg_bytes": integer,
                ], required: ["source", "frame", "t", "analyzed", "detections", "width", "height"]),
                event(["object_started", "object_updated", "object_ended"], objectFields,
                      required: ["track", "label", "class_id", "first_t", "last_t", "score", "box", "best_score", "best_t", "stationary", "zones"]),
                event(["zone_enter", "zone_exit", "loitering"], ["track": integer, "zone": string], required: ["track", "zone"]),
                event(["line_cross"], ["track": integer, "line": string, "direction": ["enum": ["in", "out"]]], required: ["track", "line", "direction"]),
                event(["clip_started"], ["start": number], required: ["start"]),
                event(["clip_finished"], ["clip": ref("Clip")], required: ["clip"]),
                ["type": "object", "required": ["type"], "properties": ["type": ["enum": [
                    "source_state", "source_stats", "job_progress", "source_added", "source_changed", "source_removed", "clip_deleted",
                    "download_progress", "download_finished", "download_failed"]]]],
            ]],
        ]
        let document: [String: Any] = [
            "openapi": "3.1.0",
            "info": ["title": "Spotter", "version": "1", "description": "Object detection and recorded clips. With --token, send Authorization: Bearer TOKEN. Changes (POST, DELETE) from a browser must come from this server's own origin; JSON bodies need Content-Type: application/json."],
            "components": ["securitySchemes": ["bearer": ["type": "http", "scheme": "bearer"]], "schemas": schemas],
            "paths": checked,
            // Outgoing: what --webhook URLs receive.
            "webhooks": ["event": ["post": [
                "summary": "An Event, header X-Spotter-Event naming its type: clip_finished (a clip was finished and indexed; retried until a 2xx answer), object_started, object_ended, zone_enter, zone_exit, loitering, line_cross",
                "requestBody": ["required": true, "content": ["application/json": ["schema": ["$ref": "#/components/schemas/Event"]]]],
                "responses": ["200": ["description": "delivered (any 2xx)"]],
            ]]],
        ]
        let data = (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .prettyPrinted])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
