import ArgumentParser

@main
struct Spotter: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spotter",
        abstract: "Object detection with TensorFlow Lite models, in Swift.",
        discussion: """
            Examples:
              spotter detect photo.jpg --save-dir annotated/
              spotter inspect ../shared/models/coco-ssd-mobilenet-v1/detect.tflite
              spotter run detect.tflite --input frame.npy --output-dir out/
            """,
        subcommands: [Detect.self, Inspect.self, Run.self, Bench.self]
    )
}
