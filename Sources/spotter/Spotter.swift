import ArgumentParser

@main
struct Spotter: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spotter",
        abstract: "Object detection with TensorFlow Lite models, in Swift.",
        discussion: """
            Examples:
              spotter inspect ../shared/models/coco-ssd-mobilenet-v1/detect.tflite
              spotter run detect.tflite --input frame.npy --output-dir out/
            """,
        subcommands: [Inspect.self, Run.self, Bench.self]
    )
}
