#!/usr/bin/env python3
"""Failover time and database load of `spotter serve --database` (issue 37), on a throwaway
PostgreSQL (the classes of check_cluster.py) with three nodes and six looping file sources.

  failover    kill -9 of the node with the most sources, to the first frame a moved source
              analyses on another node (its /metrics frame counter), over --trials trials; the
              killed node is started again between trials and the sources spread back
  load        transactions per second the cluster's database commits while the six sources run
              (pg_stat_database), outbox rows (events) and notifications per camera, bytes per row
  capacity    pgbench with the cluster's statements (a fenced outbox insert; a node's lease round)
              on the same server, fsync on, and the share of it 1000 cameras would take

Usage: bench_cluster.py SPOTTER_BINARY [--trials 10]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from check_cluster import VIDEO, Node, Postgres, api
from checklib import wait_until


def frames(node, source):
    """Frames a source has analysed on this node, None when the node does not answer."""
    try:
        return node.metric(f'spotter_source_frames_total{{source="{source}"}}')
    except Exception:
        return None


def pgbench(database, work, name, script, clients, seconds=15):
    """Transactions per second pgbench reaches with `script` (fresh connections kept, no vacuum)."""
    path = os.path.join(work, f"{name}.sql")
    with open(path, "w") as f:
        f.write(script)
    out = subprocess.run([f"{database.bin}/pgbench", "-n", "-h", "127.0.0.1", "-p", str(database.port), "-U", "spotter", "-c", str(clients),
                          "-j", "2", "-T", str(seconds), "-f", path, "spotter"], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("tps"))
    return float(line.split("=")[1].split()[0])


def capacity(database, work, load, cameras=1000, per_node=32, lease_seconds=5, reads_per_second=5, poll_seconds=2):
    """What one PostgreSQL on this machine (fsync on) sustains of the cluster's three kinds of
    transaction, and the share of it 1000 cameras would take: each camera's outbox rows at the
    rate measured above; each node's lease round (heartbeat, renew, the nodes, the count of
    sources) three times a lease; each node's outbox reads, at most five a second (wake-ups
    in between are one) and a poll every 2 s."""
    nodes = cameras // per_node + 1
    database.rows(f"INSERT INTO nodes (name, cores) SELECT 'bench-node-' || g, 2 FROM generate_series(0, {nodes - 1}) g")
    database.rows(f"""INSERT INTO sources (id, settings, owner, generation, lease_expires, state)
                      SELECT 'bench-' || g, '{{}}', 'bench-node-' || (g % {nodes}), 1, now() + interval '1 hour', 'running'
                      FROM generate_series(1, {cameras}) g""")
    inserts = pgbench(database, work, "events", f"""\\set s random(1, {cameras})
INSERT INTO events (source_id, generation, node, type, body)
SELECT id, generation, owner, 'object_started', repeat('x', {max(load['body_bytes'], 1)}) FROM sources
WHERE id = 'bench-' || :s AND generation = 1 AND lease_expires > now() FOR SHARE;
""", clients=8)
    rounds = pgbench(database, work, "rounds", f"""\\set n random(0, {nodes - 1})
INSERT INTO nodes (name, cores, load) VALUES ('bench-node-' || :n, 2, 0.5)
ON CONFLICT (name) DO UPDATE SET load = excluded.load, heartbeat = now();
UPDATE sources SET lease_expires = now() + interval '1 hour' WHERE owner = 'bench-node-' || :n AND generation = 1;
SELECT name, cores, heartbeat FROM nodes;
SELECT count(*) FROM sources WHERE desired = 'running';
""", clients=4)
    # clip rows (the shared album's index), written as a node writes them: fenced by the lease in the same statement
    body = int(float(database.rows("SELECT coalesce(avg(length(body)), 600) FROM clips")[0]))
    clip_inserts = pgbench(database, work, "clips", f"""\\set s random(1, {cameras})
INSERT INTO clips (clip, source, labels, created_at, incomplete, source_id, node, generation, body)
SELECT 'clips/' || gen_random_uuid()::text || '.mp4', 'rtsp://cam/' || :s, 'person', now()::text, false, 'bench-' || :s, 'bench-node-' || (:s % {nodes}), 1,
       repeat('x', {body})
WHERE EXISTS (SELECT 1 FROM sources WHERE id = 'bench-' || :s AND generation = 1 AND owner = 'bench-node-' || (:s % {nodes}) FOR SHARE);
""", clients=8)
    database.rows("ANALYZE clips")
    clip_rows, clip_size = (int(v) for v in database.rows("SELECT count(*), pg_total_relation_size('clips') FROM clips")[0].split("|"))
    database.rows("ANALYZE events")  # as autovacuum would after tens of thousands of inserts
    rows, size = (int(v) for v in database.rows("SELECT count(*), pg_total_relation_size('events') FROM events")[0].split("|"))
    need_inserts = load["events"] / load["cameras"] * cameras
    per_read = max(1, round(need_inserts / (nodes * reads_per_second)))
    # a read from a cursor `per_read` rows before the end, as each node's reads would find them
    # (e.tx, not tx: a column named tx in the select list would order as text)
    tx, row = database.rows(f"SELECT e.tx::text AS tx_text, e.id FROM events e ORDER BY e.tx DESC, e.id DESC OFFSET {per_read} LIMIT 1")[0].split("|")
    reads = pgbench(database, work, "reads", f"""SELECT e.id, e.tx::text AS tx_text, e.source_id, e.generation, e.node, e.type, e.body FROM events e
WHERE (e.tx, e.id) > ('{tx}'::xid8, {row}) AND e.tx < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY e.tx, e.id LIMIT 500;
""", clients=4)
    need_rounds = nodes * 3 / lease_seconds
    need_reads = nodes * (min(reads_per_second, need_inserts) + 1 / poll_seconds)
    need_clips = load["clips"] / load["cameras"] * cameras
    share = need_inserts / inserts + need_rounds / rounds + need_reads / reads + need_clips / clip_inserts
    print(f"capacity (pgbench on this machine, fsync on, its 2 cores shared with pgbench): {inserts:.0f} fenced outbox inserts/s, "
          f"{rounds:.0f} lease rounds/s (heartbeat, renew of a node's {per_node} leases, nodes, count), {reads:.0f} outbox reads/s of {per_read} rows, "
          f"{clip_inserts:.0f} fenced clip rows/s", flush=True)
    print(f"{cameras} cameras on {nodes} nodes of {per_node}: {need_inserts:.0f} outbox rows/s (one NOTIFY each), {need_rounds:.0f} lease rounds/s, "
          f"{need_reads:.0f} outbox reads/s, {need_clips:.1f} clip rows/s: {share * 100:.0f}% of this PostgreSQL", flush=True)
    if load["clips"] > 0:
        per_clip = load["events"] / load["clips"]
        row_bytes = size / max(rows, 1)
        print(f"outbox per million clips: {per_clip:.1f} events per clip here, {per_clip * row_bytes / 1e3:.2f} GB at {row_bytes:.0f} bytes "
              f"per row on disk with its index ({rows} rows measured)", flush=True)
    clip_bytes = clip_size / max(clip_rows, 1)
    print(f"album index per million clips: {clip_bytes * 1e6 / 1e9:.2f} GB at {clip_bytes:.0f} bytes per row on disk with its indexes "
          f"({clip_rows} rows of {body}-byte entries measured)", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("spotter")
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    spotter = os.path.abspath(args.spotter)
    work = tempfile.mkdtemp(prefix="spotter-bench-cluster-")
    os.chmod(work, 0o755)
    database = Postgres(work, fsync=True)
    nodes = []
    try:
        media = os.path.join(work, "media")
        album = os.path.join(work, "album")
        os.makedirs(media)
        first = os.path.join(media, "cam1.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", VIDEO, "-t", "12", "-vf", "scale=480:-2,fps=10", "-c:v", "libx264", "-preset", "veryfast",
                        "-an", first], check=True)
        for index in range(2, 7):
            shutil.copy(first, os.path.join(media, f"cam{index}.mp4"))
        nodes = [Node(spotter, f"n{index}", album, media, database.url, work) for index in range(1, 4)]
        assert all(wait_until(node.up, 60) for node in nodes), "the nodes did not start"
        # the cluster's routes answer once the first node has migrated the schema
        assert wait_until(lambda: api(nodes[0].port, "GET", "/api/v1/sources")[0] == 200, 60), api(nodes[0].port, "GET", "/api/v1/sources")
        ids = [api(nodes[0].port, "POST", "/api/v1/sources", {"input": os.path.join(media, f"cam{i}.mp4"), "loop": True, "realtime": True,
                                                              "record": True})[1]["id"] for i in range(1, 7)]

        def spread():
            owners = [line.split("|") for line in database.rows("SELECT id, owner FROM sources WHERE lease_expires > now()")]
            return len(owners) == 6 and {owner for _, owner in owners} == {node.name for node in nodes if node.process.poll() is None}

        assert wait_until(spread, 60), "the sources did not spread"
        # load: what the database commits and the outbox receives over 30 s while six sources run
        def counters():
            commits = int(database.rows("SELECT xact_commit FROM pg_stat_database WHERE datname = 'spotter'")[0])
            events, clips = (int(v) for v in database.rows("SELECT count(*), count(*) FILTER (WHERE type = 'clip_finished') FROM events")[0].split("|"))
            return commits, events, clips
        (commits0, events0, clips0), began = counters(), time.time()
        time.sleep(30)
        commits1, events1, clips1 = counters()
        span = time.time() - began
        load = {"commits": (commits1 - commits0) / span, "events": (events1 - events0) / span,
                "clips": (clips1 - clips0) / span, "cameras": len(ids), "nodes": len(nodes)}
        load["body_bytes"] = int(float(database.rows("SELECT coalesce(avg(length(body)), 0) FROM events")[0]))
        mix = database.rows("SELECT type, count(*) FROM events GROUP BY type ORDER BY 2 DESC")
        print(f"load: {load['commits']:.1f} transactions/s with 3 nodes and 6 cameras at 10 fps; the outbox receives "
              f"{load['events']:.2f} rows/s ({load['events'] / 6:.2f} per camera, one NOTIFY each), {load['clips'] * 60:.1f} clips/min; "
              f"bodies {load['body_bytes']} bytes on average; events by type: {', '.join(mix)}", flush=True)

        times = []
        for trial in range(args.trials):
            owners = dict(line.split("|") for line in database.rows("SELECT id, owner FROM sources"))
            counts = {node.name: sum(1 for owner in owners.values() if owner == node.name) for node in nodes}
            victim = max(nodes, key=lambda node: counts[node.name])
            moved = [i for i, owner in owners.items() if owner == victim.name]
            survivors = [node for node in nodes if node is not victim]
            victim.process.send_signal(signal.SIGKILL)
            victim.process.wait()
            killed = time.time()

            def first_frame():
                return any((frames(node, i) or 0) > 0 for node in survivors for i in moved)

            ok = wait_until(first_frame, 30, step=0.05)
            took = time.time() - killed
            times.append(took if ok else float("inf"))
            print(f"trial {trial + 1}: {victim.name} ({len(moved)} sources) killed; first frame on another node after {took:.2f} s", flush=True)
            # the killed node comes back and the sources spread again
            index = nodes.index(victim)
            nodes[index] = Node(spotter, victim.name, album, media, database.url, work)
            assert wait_until(nodes[index].up, 60)
            assert wait_until(spread, 60), "the sources did not spread back"
        finite = [t for t in times if t != float("inf")]
        if times:
            print(f"failover over {len(times)} trials: median {statistics.median(times):.2f} s, max {max(times):.2f} s"
                  + ("" if len(finite) == len(times) else f" ({len(times) - len(finite)} never came back within 30 s)"), flush=True)
        for node in nodes:
            node.process.send_signal(signal.SIGTERM)
            node.process.wait(timeout=30)
        capacity(database, work, load)
    finally:
        for node in nodes:
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
                try:
                    node.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    node.process.kill()
        database.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
