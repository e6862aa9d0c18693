/// What went wrong talking to the cluster's database.
public enum ClusterError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The `--database` URL (password hidden) cannot be used, and why.
    case badURL(String, reason: String)
    /// A query failed: what it was for, and PostgreSQL's or the connection's reason.
    case database(doing: String, reason: String)
    /// No answer from the database within `seconds`, while doing `doing`.
    case timedOut(doing: String, seconds: Double)
    /// The database's schema is newer than this build knows: a newer Spotter migrated it.
    case schemaTooNew(found: Int, known: Int)
    /// A write for `source` under lease `generation` was refused: the lease has expired or another
    /// node has taken the source since (fencing).
    case fenced(source: String, generation: Int64)
    /// No source with this id in the cluster.
    case unknownSource(String)

    public var description: String {
        switch self {
        case .badURL(let url, let reason): return "cannot use the database URL \(url): \(reason)"
        case .database(let doing, let reason): return "the cluster database failed while \(doing): \(reason)"
        case .timedOut(let doing, let seconds): return "the cluster database did not answer within \(seconds) s while \(doing)"
        case .schemaTooNew(let found, let known):
            return "the cluster database has schema version \(found), but this Spotter knows versions up to \(known): upgrade this node"
        case .fenced(let source, let generation):
            return "the write for source \(source) under lease generation \(generation) was refused: the lease expired or another node took the source"
        case .unknownSource(let id): return "no source \(id) in the cluster"
        }
    }
}
