import ArgumentParser
import Foundation
import Inference

@main
struct Spotter: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spotter",
        abstract: "Object detection with TensorFlow Lite models, in Swift.",
        discussion: """
            Examples:
              spotter detect photo.jpg --save-dir annotated/
              spotter rectangles receipt.jpg --rectify flat/
              spotter video street.mp4 --output boxes.mp4
              spotter record doorbell.mp4 --album ~/Clips
              spotter album list ~/Clips
              spotter models pull coco-ssd-mobilenet-v1
              spotter samples list
              spotter inspect ../shared/models/coco-ssd-mobilenet-v1/detect.tflite
              spotter run detect.tflite --input frame.npy --output-dir out/
            """,
        version: "spotter 0.4.0",
        subcommands: [Detect.self, RectanglesCommand.self, FacesCommand.self, Video.self, Record.self, Track.self, Val.self, AlbumCommand.self, Serve.self, ClusterCommand.self, Models.self, Samples.self, Inspect.self, Run.self, Bench.self]
    )
}

extension Spotter {
    static func main() async {
        // A file-size limit (`ulimit -f`) then fails a write with EFBIG, which the commands report
        // and clean up after, instead of killing the process halfway through a file.
        signal(SIGXFSZ, SIG_IGN)
        await main(nil)
    }
}

/// A failure at run time (a file that cannot be read, a damaged video): ArgumentParser prints
/// "Error: " and the description, which says what to do, without the usage text that a
/// `ValidationError` (a bad flag) adds. Library errors such as `StoreError` print the same way.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ text: String) { description = text }
}

/// `--threads`, or the cores this process may use; a request above that is lowered to it with a
/// warning (more threads than cores only wait for each other).
func threadsWithinCores(_ requested: Int?) -> Int {
    let available = Processors.available
    guard let requested else { return available }
    if requested > available {
        warn("--threads \(requested) is more than the \(available) cores this process may use; using \(available)")
    }
    return min(requested, available)
}

/// For the long runs (serve, record, video), which open and close encoders and frame buffers of
/// several MiB all the time: glibc's default raises its mmap threshold after the first such buffer
/// is freed, later ones come from heaps that fragment, and with a heap per thread RSS kept growing
/// (serve's load run: 163 -> 377 MiB in 10 minutes). Two heaps and a trim every 30 s keep it flat
/// without the page faults of a fixed mmap threshold (which slowed `video` by about 15%).
func keepHeapCompactForLongRuns() {
    HeapTuning.keepCompact()
}

/// One line on standard error, prefixed `Warning:`.
func warn(_ message: String) {
    FileHandle.standardError.write(Data("Warning: \(message)\n".utf8))
}
