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
        let paths: [String: Any] = [
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
                           "responses": ["204": response("deleted", nil), "404": error, "401": unauthorized]],
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
                "responses": ["200": response("{image, width, height, timings_ms, detections: [{label, class_id, score, box}]}"),
                              "400": error, "413": error, "415": error, "422": error, "401": unauthorized],
            ]],
            "/v1/vision/detection": ["post": [
                "summary": "DeepStack-compatible detection (Frigate, Home Assistant, Blue Iris)",
                "parameters": detectParameters, "requestBody": picture,
                "responses": ["200": response("{success, predictions: [{label, confidence, x_min, y_min, x_max, y_max}], duration}"),
                              "400": error, "413": error, "415": error, "422": error, "401": unauthorized],
            ]],
        ]
        let document: [String: Any] = [
            "openapi": "3.1.0",
            "info": ["title": "Spotter", "version": "1", "description": "Object detection and recorded clips. With --token, send Authorization: Bearer TOKEN."],
            "components": ["securitySchemes": ["bearer": ["type": "http", "scheme": "bearer"]]],
            "paths": paths,
        ]
        let data = (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .prettyPrinted])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }()
}
