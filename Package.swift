// swift-tools-version: 6.0
import PackageDescription

/// `SPOTTER_MEMORY_CHECK=1` leaves out the server, the model store and the command line (and the
/// packages only they use) so the AddressSanitizer build in `scripts/test.sh` compiles just the
/// modules that touch unsafe memory and their test suites.
let memoryCheckOnly = Context.environment["SPOTTER_MEMORY_CHECK"] == "1"
let shellTargets: Set<String> = ["Server", "ServerTests", "spotter", "ModelStore", "ModelStoreTests", "CCurl", "CZlib", "Cluster", "ClusterTests"]

let package = Package(
    name: "Spotter",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "TFLiteFormat", targets: ["TFLiteFormat"]),
        .library(name: "Inference", targets: ["Inference"]),
        .library(name: "Imaging", targets: ["Imaging"]),
        .library(name: "Media", targets: ["Media"]),
        .library(name: "Detection", targets: ["Detection"]),
        .library(name: "Rectangles", targets: ["Rectangles"]),
        .library(name: "Faces", targets: ["Faces"]),
        .library(name: "Tracking", targets: ["Tracking"]),
        .library(name: "Evaluation", targets: ["Evaluation"]),
        .library(name: "ModelStore", targets: ["ModelStore"]),
        .library(name: "Cluster", targets: ["Cluster"]),
        .library(name: "Server", targets: ["Server"]),
        .executable(name: "spotter", targets: ["spotter"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // Debian's XNNPACK and pthreadpool (libxnnpack-dev, libpthreadpool-dev).
        .systemLibrary(name: "CXNNPACK", providers: [.apt(["libxnnpack-dev", "libpthreadpool-dev"])]),
        // Debian's FFmpeg (libavformat-dev, libavcodec-dev, libavutil-dev, libswscale-dev), opened on first
        // use rather than linked: loading it costs more than `inspect` or a JPEG detection takes.
        .target(name: "CFFmpeg"),
        // Debian's FreeType (libfreetype-dev); fonts from fonts-dejavu-core.
        .systemLibrary(name: "CFreeType", pkgConfig: "freetype2", providers: [.apt(["libfreetype-dev"])]),
        // Debian's libcurl (libcurl4-openssl-dev): HTTP(S) downloads for the model store.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // Debian's zlib (zlib1g-dev): deflate entries of downloaded zip archives.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // AVX-512 VNNI kernels Swift cannot express (no per-function target features without
        // unsafeFlags); each checks the CPU at run time.
        .target(name: "CKernels", dependencies: ["CXNNPACK"]),
        // JPEG decoding on Debian's libjpeg-turbo (libjpeg62-turbo-dev) with OpenCV's settings; in C
        // because libjpeg reports errors by longjmp.
        .target(name: "CJPEG", linkerSettings: [.linkedLibrary("jpeg")]),
        // Pure Swift, no C: reads untrusted .tflite bytes (FlatBuffers, FlexBuffers, metadata, zip).
        .target(name: "TFLiteFormat"),
        // Interpreter, memory planning, reference and XNNPACK kernels, the post-process custom op.
        .target(name: "Inference", dependencies: ["TFLiteFormat", "CXNNPACK", "CKernels"]),
        // The affine warp's AVX2 + FMA kernel: OpenCV blends with fused multiply-adds, which Swift cannot
        // emit without unsafeFlags (Imaging keeps a portable Swift warp for other machines).
        .target(name: "CImaging"),
        // Swift: pixel formats, conversion, orientation, resize, crop/letterbox, geometry, drawing.
        .target(name: "Imaging", dependencies: ["CImaging"]),
        // Text rendering with FreeType.
        .target(name: "Typeface", dependencies: ["CFreeType", "Imaging"]),
        // FFmpeg: image files, video reading and writing; JPEG through libjpeg-turbo.
        .target(name: "Media", dependencies: ["CFFmpeg", "CJPEG", "Imaging"]),
        // Pure Swift: objects over time: the multi-object tracker (Kalman filter, optimal assignment).
        .target(name: "Tracking", dependencies: ["Imaging"]),
        // Pure Swift: COCO box evaluation (pycocotools' COCOeval) for `spotter val`.
        .target(name: "Evaluation"),
        // Pure Swift: rectangle detection like Apple Vision's, perspective rectification.
        .target(name: "Rectangles", dependencies: ["Imaging"]),
        // ObjectDetector, labels, output layouts, result encodings, annotation.
        .target(name: "Detection", dependencies: ["Inference", "TFLiteFormat", "Imaging", "Typeface"]),
        // The frame analysis (detect, track, zones, motion gating), the frame pipeline with
        // back-pressure, the clip recorder, the album index (SQLite via GRDB).
        .target(name: "Pipeline", dependencies: ["Detection", "Media", "Imaging", "Rectangles", "Tracking", .product(name: "GRDB", package: "GRDB.swift")]),
        // Face recognition: BlazeFace keypoints, alignment on ArcFace's template, embeddings, a gallery (SQLite via GRDB).
        .target(name: "Faces", dependencies: ["Detection", "Inference", "Imaging", "Media", .product(name: "GRDB", package: "GRDB.swift")]),
        // Catalog of models and sample videos, the cache, checked and resumable downloads.
        .target(name: "ModelStore", dependencies: ["CCurl", "CZlib", "TFLiteFormat", .product(name: "Crypto", package: "swift-crypto")]),
        // Several `spotter serve` nodes as one: sources leased to nodes with fencing, the event
        // outbox, on PostgreSQL (postgres-nio).
        .target(name: "Cluster", dependencies: ["Pipeline", .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Logging", package: "swift-log")]),
        // `spotter serve`: pages, the JSON API, clip files with byte ranges, detection endpoints (Hummingbird 2).
        .target(name: "Server", dependencies: [
            "Cluster", "Detection", "Pipeline", "Media", "Imaging", "Rectangles", "Tracking", "ModelStore", .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"), .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"), .product(name: "NIOCore", package: "swift-nio"),
        ]),
        // The command-line shell.
        .executableTarget(
            name: "spotter",
            dependencies: [
                "TFLiteFormat", "Inference", "Imaging", "Media", "Detection", "Pipeline", "ModelStore", "Server", "Rectangles", "Faces", "Tracking", "Evaluation", "Cluster",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `serve --config` reads YAML as well as JSON.
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        .target(name: "TestSupport", dependencies: ["Inference", "Imaging"], path: "Tests/TestSupport"),
        .testTarget(name: "TFLiteFormatTests", dependencies: ["TFLiteFormat", "TestSupport"]),
        .testTarget(name: "InferenceTests", dependencies: ["Inference", "TFLiteFormat", "TestSupport"]),
        .testTarget(name: "ImagingTests", dependencies: ["Imaging", "Media", "TestSupport"]),
        .testTarget(name: "DetectionTests", dependencies: ["Detection", "Imaging", "Media", "Inference", "TFLiteFormat", "TestSupport"]),
        .testTarget(name: "ModelStoreTests", dependencies: ["ModelStore", "TestSupport"]),
        .testTarget(name: "ServerTests", dependencies: [
            "Server", "Pipeline", "Detection", "Media", "Imaging", "ModelStore", "TestSupport", .product(name: "HummingbirdTesting", package: "hummingbird"),
        ]),
        .testTarget(name: "RectanglesTests", dependencies: ["Rectangles", "Imaging", "Media", "TestSupport"]),
        .testTarget(name: "FacesTests", dependencies: ["Faces", "Detection", "Imaging", "Media", "Inference", "TestSupport"]),
        .testTarget(name: "PipelineTests", dependencies: ["Pipeline", "Detection", "Media", "Imaging", "TestSupport"]),
        .testTarget(name: "TrackingTests", dependencies: ["Tracking", "Imaging", "TestSupport"]),
        .testTarget(name: "ClusterTests", dependencies: ["Cluster", "Pipeline", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "EvaluationTests", dependencies: ["Evaluation"], exclude: ["Fixtures"]),
    ]
)

if memoryCheckOnly {
    package.targets.removeAll { shellTargets.contains($0.name) }
    package.products.removeAll { product in ["spotter", "Server", "ModelStore", "Cluster"].contains(product.name) }
    // Packages only the left-out targets use.
    package.dependencies.removeAll { dependency in
        guard case .sourceControl(_, let location, _) = dependency.kind else { return false }
        return !location.hasSuffix("/GRDB.swift")
    }
}
