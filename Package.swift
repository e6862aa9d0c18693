// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Spotter",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "TFLiteFormat", targets: ["TFLiteFormat"]),
        .library(name: "Inference", targets: ["Inference"]),
        .executable(name: "spotter", targets: ["spotter"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // Debian's XNNPACK and pthreadpool (libxnnpack-dev, libpthreadpool-dev).
        .systemLibrary(name: "CXNNPACK", providers: [.apt(["libxnnpack-dev", "libpthreadpool-dev"])]),
        // AVX-512 VNNI kernels Swift cannot express (no per-function target features without
        // unsafeFlags); each checks the CPU at run time.
        .target(name: "CKernels", dependencies: ["CXNNPACK"]),
        // Pure Swift, no C: reads untrusted .tflite bytes (FlatBuffers, FlexBuffers, metadata, zip).
        .target(name: "TFLiteFormat"),
        // Interpreter, memory planning, reference and XNNPACK kernels, the post-process custom op.
        .target(name: "Inference", dependencies: ["TFLiteFormat", "CXNNPACK", "CKernels"]),
        // The command-line shell.
        .executableTarget(
            name: "spotter",
            dependencies: [
                "TFLiteFormat", "Inference",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(name: "TestSupport", dependencies: ["Inference"], path: "Tests/TestSupport"),
        .testTarget(name: "TFLiteFormatTests", dependencies: ["TFLiteFormat", "TestSupport"]),
        .testTarget(name: "InferenceTests", dependencies: ["Inference", "TFLiteFormat", "TestSupport"]),
    ]
)
