import Foundation

/// The OpenAPI 3.1 description of the server's API, served at `/api/v1/openapi.json`; the router
/// tests call every operation it lists and check the answer against its documented statuses.
enum OpenAPI {
    static let document: String = {
        func response(_ description: String, _ type: String? = "application/json") -> [String: Any] {
            var object: [String: Any] = ["description": description]
            if let type { object["content"] = [type: ["schema": ["type": type == "application/json" ? "object" : "string"]]] }
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
                "get": ["summary": "Sources and their status", "responses": ["200": response("{\"sources\": [status]}"), "401": unauthorized]],
                "post": ["summary": "Add a source: a camera, stream, file or sample",
                         "requestBody": ["required": true, "content": ["application/json": ["schema": [
                             "type": "object", "required": ["input"],
                             "properties": [
                                 "input": ["type": "string", "description": "file, rtsp/http(s)/tcp/udp/hls URL, /dev/videoN or sample name"],
                                 "record": ["type": "boolean", "description": "record clips into the album (default true)"],
                                 "classes": ["type": "array", "items": ["type": "string"], "description": "labels to detect and record (default [\"person\"]; [] for all)"],
                                 "threshold": ["type": "number", "description": "lowest score, 0.05...1 (default 0.5)"],
                                 "realtime": ["type": "boolean", "description": "play a file at its own pace, as a camera (default false: a job as fast as possible)"],
                                 "trigger": ["type": "string", "enum": ["detection", "unknown-face"],
                                             "description": "what records: any detection of classes (default), or a stranger's face (serve --faces)"],
                                 "loop": ["type": "boolean", "description": "start a file again at its end (default false)"],
                                 "rectangles": ["type": "boolean", "description": "also find rectangles (pages, cards, screens) on every frame with Vision's default options: in detection events as rectangles [{corners, normalized, box, confidence}], outlined in the live view and snapshots (default false)"],
                             ],
                         ]]]],
                         "responses": ["201": response("the source's status, with its id"), "400": error, "409": error, "413": error, "415": error,
                                       "503": error, "401": unauthorized]],
            ],
            "/api/v1/sources/{id}": [
                "get": ["summary": "One source's status: state (opening, waiting, running, reconnecting, paused, finished, stopped, failed) and its message, origin (api or config), settings, fps, inference ms, dropped frames, recording, progress of files",
                        "parameters": [sourceID], "responses": ["200": response("status"), "404": error, "401": unauthorized]],
                "delete": ["summary": "Stop and remove a source (its open clip is finished and indexed); it is not started again after a restart",
                           "parameters": [sourceID], "responses": ["204": response("removed", nil), "404": error, "507": error, "401": unauthorized]],
                "patch": ["summary": "Change a source's settings (any of record, classes, threshold, realtime, loop, trigger, rectangles, paused, rtsp_transport): it restarts with them under the same id; kept across restarts",
                          "parameters": [sourceID],
                          "requestBody": ["required": true, "content": ["application/json": ["schema": ["type": "object"]]]],
                          "responses": ["200": response("the source's status"), "400": error, "404": error, "415": error, "507": error,
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
                "summary": "Server-Sent Events: detection (frame, decoded_at, width, height, detections, image_url, and rectangles for sources that find them), clip_started, clip_finished, source_state, source_stats, job_progress, source_added, source_removed, clip_deleted, download_progress, download_finished, download_failed",
                "parameters": [parameter("source", "query", "string", "only this source's events"),
                               parameter("types", "query", "string", "comma-separated event types to keep")],
                "responses": ["200": response("an endless event stream", "text/event-stream"), "401": unauthorized],
            ]],
            "/api/v1/live": ["get": [
                "summary": "The live view's stream: one line of JSON per event (the same events as /api/v1/events); a detection line carries jpeg_bytes, and that many bytes of its frame's JPEG follow the line. A slow reader skips to the newest frame",
                "parameters": [parameter("sources", "query", "string", "comma-separated source ids (default: every source)"),
                               parameter("types", "query", "string", "comma-separated event types to keep")],
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
                "responses": ["200": response("{\"clips\": [{id, source, start, end, duration, frames, labels, best_score, incomplete, created_at, url, thumbnail_url}], \"next\": URL or null}"),
                              "400": error, "401": unauthorized],
            ]],
            "/api/v1/album/{id}": [
                "get": ["summary": "One clip", "parameters": [parameter("id", "path", "integer", "clip id")],
                        "responses": ["200": response("the clip"), "404": error, "401": unauthorized]],
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
                "responses": ["200": response("{image, width, height, timings_ms, detections: [{label, class_id, score, box, identity (serve --faces: {name, distance})}]}"),
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
        let document: [String: Any] = [
            "openapi": "3.1.0",
            "info": ["title": "Spotter", "version": "1", "description": "Object detection and recorded clips. With --token, send Authorization: Bearer TOKEN. Changes (POST, DELETE) from a browser must come from this server's own origin; JSON bodies need Content-Type: application/json."],
            "components": ["securitySchemes": ["bearer": ["type": "http", "scheme": "bearer"]]],
            "paths": checked,
            // Outgoing: what --webhook URLs receive.
            "webhooks": ["clipFinished": ["post": [
                "summary": "A clip was finished and indexed: {type: clip_finished, source, clip: {id, source, start, end, duration, frames, labels, best_score, incomplete, created_at, url, thumbnail_url}}; retried until a 2xx answer",
                "requestBody": ["required": true, "content": ["application/json": ["schema": ["type": "object"]]]],
                "responses": ["200": ["description": "delivered (any 2xx)"]],
            ]]],
        ]
        let data = (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .prettyPrinted])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }()
}
