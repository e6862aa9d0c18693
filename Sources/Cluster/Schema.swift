/// The cluster's tables, as numbered migrations applied in order. A migration, once released,
/// never changes: a change is a new migration at the end.
///
/// - `nodes`: one row per node, its cores, capacity (in cores) and last heartbeat (database time).
/// - `sources`: every source of the cluster, its settings and desired state, and its lease: the
///   owner, the generation (raised by every claim) and the expiry (database time).
/// - `events`: the outbox. `tx` is the writing transaction's id; readers follow ``OutboxCursor``'s rule.
/// - `clips`, `counts`: the shared album's index (``ClusterAlbumIndex``).
enum Schema {
    /// Each migration's statements (one statement each: the extended protocol takes one at a time).
    static let migrations: [[String]] = [
        // 1: nodes, sources with leases, the event outbox with a wake-up notification.
        [
            """
            CREATE TABLE nodes (
                name text PRIMARY KEY,
                address text NOT NULL DEFAULT '',
                cores integer NOT NULL CHECK (cores > 0),
                load double precision NOT NULL DEFAULT 0,
                started_at timestamptz NOT NULL DEFAULT now(),
                heartbeat timestamptz NOT NULL DEFAULT now(),
                claims bigint NOT NULL DEFAULT 0,
                takeovers bigint NOT NULL DEFAULT 0
            )
            """,
            "CREATE SEQUENCE source_numbers",
            """
            CREATE TABLE sources (
                id text PRIMARY KEY,
                position bigserial,
                settings text NOT NULL,
                desired text NOT NULL DEFAULT 'running' CHECK (desired IN ('running', 'paused')),
                owner text,
                generation bigint NOT NULL DEFAULT 0,
                lease_expires timestamptz,
                state text NOT NULL DEFAULT 'waiting',
                added_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            """
            CREATE TABLE events (
                id bigserial PRIMARY KEY,
                tx xid8 NOT NULL DEFAULT pg_current_xact_id(),
                source_id text,
                generation bigint,
                node text NOT NULL,
                type text NOT NULL,
                body text NOT NULL,
                at timestamptz NOT NULL DEFAULT clock_timestamp()
            )
            """,
            "CREATE INDEX events_commit_order ON events (tx, id)",
            """
            CREATE FUNCTION spotter_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_notify('\(eventsChannel)', ''); RETURN NULL; END $$
            """,
            "CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION spotter_events_notify()",
        ],
        // 2: each node's capacity for placement, in cores (its cores less what other processes use); NULL: its cores.
        [
            "ALTER TABLE nodes ADD COLUMN capacity double precision CHECK (capacity > 0)",
        ],
        // 3: the shared album's index (``ClusterAlbumIndex``): a row per clip (its whole entry as
        // JSON in `body`, and the columns queries filter on), and the hourly zone and line counts.
        [
            """
            CREATE TABLE clips (
                id bigserial PRIMARY KEY,
                clip text NOT NULL UNIQUE,
                source text NOT NULL,
                labels text NOT NULL,
                created_at text NOT NULL,
                incomplete boolean NOT NULL,
                source_id text,
                node text,
                generation bigint,
                body text NOT NULL
            )
            """,
            "CREATE INDEX clips_by_source ON clips (source, id)",
            """
            CREATE TABLE counts (
                source text NOT NULL,
                hour text NOT NULL,
                kind text NOT NULL,
                name text NOT NULL,
                direction text NOT NULL,
                count bigint NOT NULL,
                PRIMARY KEY (source, hour, kind, name, direction)
            )
            """,
        ],
    ]

    /// The channel the events trigger notifies (a wake-up only: readers read the table).
    static let eventsChannel = "spotter_events"
    /// The advisory lock that serializes migrations when several nodes start at once.
    static let migrationLock: Int64 = 0x5370_6f74_7465_72
}
