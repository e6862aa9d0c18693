/// Why face recognition could not be set up or a gallery could not be used.
public enum FaceError: Error, Equatable, Sendable, CustomStringConvertible {
    case unsupportedDetector(path: String, reason: String)
    case unsupportedEmbedder(path: String, reason: String)
    case galleryFailed(path: String, reason: String)
    case invalidName(String)
    case dimensionMismatch(gallery: Int, embedder: Int)

    public var description: String {
        switch self {
        case .unsupportedDetector(let path, let reason): return "\(path) cannot find faces: \(reason)"
        case .unsupportedEmbedder(let path, let reason): return "\(path) is not a face embedding model: \(reason)"
        case .galleryFailed(let path, let reason): return "cannot use the face gallery \(path): \(reason)"
        case .invalidName(let name): return "\"\(name)\" is not a usable name (1 to 100 characters, not only spaces, no control characters)"
        case .dimensionMismatch(let gallery, let embedder):
            return "the gallery holds \(gallery)-number embeddings but the embedder gives \(embedder): enroll again with this embedder, or use its own gallery"
        }
    }
}
