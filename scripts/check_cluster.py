#!/usr/bin/env python3
"""Several `spotter serve` nodes sharing PostgreSQL (issue 37), against the built binary and a
throwaway PostgreSQL server of Debian's package (initdb in a temporary folder, 127.0.0.1).

  spread      three nodes, one database, one album folder; six looping file sources (copies of one
              video, recording) added through node 1's API all run within 20 s (the issue's bound), on all three nodes;
              `spotter cluster status` shows what psql reads
  relay       node 2's live stream of a source node 1 runs carries that source's frames (JPEGs
              OpenCV decodes) and detections
  outage      PostgreSQL stopped (immediate shutdown) for 5 s and started again: no source moves
              or stops, every lease keeps its generation
  failover    kill -9 of the node with the most sources: within 15 s every source runs on the
              other two, each moved one under a higher lease generation
  pause       SIGSTOP of a node for 30 s: its sources move; a lease period after SIGCONT it has
              stopped each under the lease it lost, and each runs on one node, its owner
  events      the never-stopped survivor's /api/v1/events sent every clip_finished the outbox
              holds (those of sources other nodes ran too), each once
  shutdown    SIGTERM ends the other nodes within 30 s, leaving no lease held and no node listed;
              every clip the index holds as complete plays (ffprobe) and has its clip_finished in
              the outbox; every row names its source, node and lease generation, and the clips the
              paused node finished after losing their sources were refused their rows (fenced) and
              indexed as incomplete; the rows are in PostgreSQL (no SQLite index in the folder); a
              fresh node lists every clip file once

Usage: check_cluster.py SPOTTER_BINARY
Prints one line per check and `N passed, M failed`.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import cv2
import numpy as np

from checklib import MODEL, SHARED, check, free_port, serve_sample, summary, wait_until

VIDEO = os.path.join(SHARED, "videos", "one-by-one-person-detection.mp4")
# Seconds for the last events to pass through the outbox before the streams are compared.
OUTBOX_SETTLE = 4


def api(port, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            text = answer.read()
            return answer.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


class Postgres:
    """A throwaway server: initdb in a temporary folder, `postgres` in the foreground (as the
    postgres user when this is root, which PostgreSQL refuses)."""

    def __init__(self, work, fsync=False):
        self.fsync = fsync
        versions = sorted(int(v) for v in os.listdir("/usr/lib/postgresql") if v.isdigit())
        self.bin = f"/usr/lib/postgresql/{versions[-1]}/bin"
        self.folder = os.path.join(work, "pg")
        os.makedirs(self.folder)
        self.prefix = []
        if os.getuid() == 0:
            shutil.chown(work, "postgres")
            shutil.chown(self.folder, "postgres")
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.port = free_port()
        subprocess.run(self.prefix + [f"{self.bin}/initdb", "-D", f"{self.folder}/data", "-U", "spotter", "--auth=trust", "--no-sync"],
                       check=True, stdout=subprocess.DEVNULL)
        self.log = open(os.path.join(work, "pg.log"), "w")
        self.start()
        subprocess.run([f"{self.bin}/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "spotter", "spotter"], check=True)
        self.url = f"postgres://spotter@127.0.0.1:{self.port}/spotter"

    def start(self):
        self.process = subprocess.Popen(self.prefix + [f"{self.bin}/postgres", "-D", f"{self.folder}/data", "-p", str(self.port), "-k", self.folder,
                                                       "-c", "listen_addresses=127.0.0.1", "-c", f"fsync={'on' if self.fsync else 'off'}"],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        # asked through this server's own socket folder: another server may hold the port on 127.0.0.1
        ready = wait_until(lambda: subprocess.run([f"{self.bin}/pg_isready", "-q", "-h", self.folder, "-p", str(self.port)]).returncode == 0, 30)
        if not ready:
            raise RuntimeError("PostgreSQL did not start")

    def require_password(self, role, password):
        """A superuser `role` that must sign in with `password` over TCP (SCRAM), the others still trusted."""
        self.rows(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{password}'")
        hba = f"{self.folder}/data/pg_hba.conf"
        with open(hba) as f:
            rules = f.read()
        with open(hba, "w") as f:
            f.write(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + rules)
        self.rows("SELECT pg_reload_conf()")
        # the reload is asynchronous: wait until signing in without the password fails
        bare = {k: v for k, v in os.environ.items() if k != "PGPASSWORD"}
        wait_until(lambda: subprocess.run([f"{self.bin}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", role, "-d", "spotter", "-w", "-c", "SELECT 1"],
                                          capture_output=True, env=bare).returncode != 0, 10)

    def rows(self, sql):
        out = subprocess.run([f"{self.bin}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "spotter", "-d", "spotter", "-At", "-F", "|", "-c", sql],
                             check=True, capture_output=True, text=True).stdout
        return [line for line in out.splitlines() if line]

    def stop(self):
        # SIGQUIT to the postmaster itself (runuser does not pass it on): an immediate shutdown.
        with open(f"{self.folder}/data/postmaster.pid") as f:
            os.kill(int(f.readline()), signal.SIGQUIT)
        self.process.wait(timeout=30)


class EventStream:
    """`GET /api/v1/events` of one node, read in a thread: the `clip_finished` events it sends."""

    def __init__(self, port):
        self.clips = []
        self.opened = time.time()
        thread = threading.Thread(target=self.read, args=(port,), daemon=True)
        thread.start()

    def read(self, port):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/events?types=clip_finished", timeout=120) as stream:
                for raw in stream:
                    line = raw.decode(errors="replace").strip()
                    if line.startswith("data: "):
                        clip = json.loads(line[6:]).get("clip") or {}
                        self.clips.append(os.path.basename(clip.get("path") or clip.get("url") or ""))
        except Exception:
            pass


def read_live(port, source, seconds):
    """The detection events (and their JPEGs) `GET /api/v1/live?sources=SOURCE` sends within `seconds`."""
    events = []
    deadline = time.time() + seconds
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/live?sources={source}&types=detection", timeout=5) as stream:
            while time.time() < deadline:
                line = stream.readline()
                if not line:
                    break
                event = json.loads(line)
                jpeg = stream.read(event["jpeg_bytes"]) if "jpeg_bytes" in event else None
                if event.get("type") == "detection":
                    events.append((event, jpeg))
    except (OSError, ValueError) as error:
        events.append(({"error": str(error)}, None))
    return events


def clip_name(body):
    clip = json.loads(body).get("clip") or {}
    return os.path.basename(clip.get("path") or clip.get("url") or "")


class Node:
    def __init__(self, spotter, name, album, media, database, work, extra=(), environment=None):
        self.name = name
        self.port = free_port()
        self.log = open(os.path.join(work, f"{name}.log"), "w")
        self.process = subprocess.Popen([spotter, "serve", "--album", album, "--port", str(self.port), "--model", MODEL, "--media-dir", media,
                                         "--database", database, "--node", name, *extra],
                                        stdout=self.log, stderr=subprocess.STDOUT, env=environment)

    def up(self):
        return api(self.port, "GET", "/health")[0] == 200

    def sources(self):
        status, answer = api(self.port, "GET", "/api/v1/sources")
        return {s["id"]: s for s in answer["sources"]} if status == 200 else {}

    def metrics(self):
        """The lines of this node's /metrics."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as answer:
            return answer.read().decode().splitlines()

    def running(self):
        """The sources this node runs itself (its /metrics series), whatever the database says."""
        return {line.split('"')[1] for line in self.metrics() if line.startswith('spotter_source_recording{source="')}

    def metric(self, name):
        """One series' value (`name` with its labels), None when the node does not show it."""
        for line in self.metrics():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
        return None

    def output(self):
        return open(self.log.name, errors="replace").read()


def main():
    spotter = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="spotter-cluster-")
    os.chmod(work, 0o755)
    database = Postgres(work)
    nodes = []
    try:
        media = os.path.join(work, "media")
        album = os.path.join(work, "album")
        os.makedirs(media)
        # Six copies of 12 s of the people video at 480x270 (lighter for six realtime sources on two cores).
        first = os.path.join(media, "cam1.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", VIDEO, "-t", "12", "-vf", "scale=480:-2", "-c:v", "libx264", "-preset", "veryfast",
                        "-an", first], check=True)
        for index in range(2, 7):
            shutil.copy(first, os.path.join(media, f"cam{index}.mp4"))
        # A demo video served on 127.0.0.1 through a catalog naming it; each node has its own cache folder.
        files_server, catalog = serve_sample(work, "people-demo")
        nodes = [Node(spotter, f"n{index}", album, media, database.url, work,
                      environment=dict(os.environ, SPOTTER_CATALOG=catalog, XDG_CACHE_HOME=os.path.join(work, f"cache-{index}")))
                 for index in range(1, 4)]
        started = all(wait_until(node.up, 60) for node in nodes)
        check("three nodes start on one database and one album folder", started, [node.output()[-800:] for node in nodes])
        if not started:
            return

        # spread
        answers = [api(nodes[0].port, "POST", "/api/v1/sources",
                       {"input": os.path.join(media, f"cam{index}.mp4"), "loop": True, "realtime": True, "record": True}) for index in range(1, 7)]
        check("six sources added through node 1's API are accepted (202) for a node to claim", all(status == 202 for status, _ in answers), answers)
        ids = [answer["id"] for status, answer in answers if status == 202]

        def spread():
            listed = nodes[1].sources()
            owners = {listed[i]["node"] for i in ids if i in listed and listed[i].get("node")}
            running = {i for node in nodes for i, s in node.sources().items() if s.get("node") == node.name and s.get("state") == "running"}
            local = [node.running() for node in nodes]
            once = sorted(i for here in local for i in here) == sorted(ids)
            return len(running) == 6 and owners == {"n1", "n2", "n3"} and once

        added = time.time()
        ok = wait_until(spread, 20, step=0.5)
        check("all six run within 20 s, spread over the three nodes, each on exactly one (node 2's list, each node's own status and metrics)", ok,
              {node.name: {i: (s.get("node"), s.get("state")) for i, s in node.sources().items()} for node in nodes})
        print(f"info  six sources running {time.time() - added:.1f} s after they were added", flush=True)
        before = {line.split("|")[0]: (line.split("|")[1], int(line.split("|")[2])) for line in database.rows("SELECT id, owner, generation FROM sources")}
        streams = {node.name: EventStream(node.port) for node in nodes}

        # spotter cluster status, against psql's reading of the same tables
        status = subprocess.run([spotter, "cluster", "status", "--database", database.url, "--json"], capture_output=True, text=True)
        shown = json.loads(status.stdout) if status.returncode == 0 else {}
        listed = {s["id"]: (s["node"], s["generation"]) for s in shown.get("sources", [])}
        live = sorted(n["name"] for n in shown.get("nodes", []) if n["live"])
        per_node = {n["name"]: n["sources"] for n in shown.get("nodes", [])}
        check("`spotter cluster status --json` lists the sources with the owners and generations psql reads, and three live nodes",
              listed == before and live == ["n1", "n2", "n3"]
              and per_node == {name: sum(1 for owner, _ in before.values() if owner == name) for name in ("n1", "n2", "n3")},
              (status.stdout[:600], status.stderr[-300:], before))
        text = subprocess.run([spotter, "cluster", "status", "--database", database.url], capture_output=True, text=True).stdout
        check("`spotter cluster status` prints every node and source", all(name in text for name in ["n1", "n2", "n3", *ids]), text)
        unreachable = subprocess.run([spotter, "cluster", "status", "--database", f"postgres://spotter:secret@127.0.0.1:{free_port()}/spotter"],
                                     capture_output=True, text=True, timeout=30)
        message = unreachable.stderr.strip()
        check("a database that does not answer is one line of error (exit 1, no password shown)",
              unreachable.returncode != 0 and "database" in message and "secret" not in message and len(message.splitlines()) <= 2,
              (unreachable.returncode, message))
        # The password from PGPASSWORD, not the command line: a role that must give one (SCRAM).
        database.require_password("guarded", "pw-from-environment")
        guarded = f"postgres://guarded@127.0.0.1:{database.port}/spotter"
        answers = [subprocess.run([spotter, "cluster", "status", "--database", guarded, "--json"], capture_output=True, text=True, timeout=30,
                                  env=dict(os.environ, PGPASSWORD=password)) for password in ("pw-from-environment", "wrong")]
        listed = json.loads(answers[0].stdout).get("sources", []) if answers[0].returncode == 0 else []
        check("`cluster status` signs in with PGPASSWORD's password when the URL has none (a role PostgreSQL asks a SCRAM password of), "
              "and a wrong one is one line of error that shows no password",
              {s["id"] for s in listed} == set(before) and answers[1].returncode != 0
              and "wrong" not in answers[1].stderr and len(answers[1].stderr.strip().splitlines()) <= 2,
              (answers[0].returncode, answers[0].stderr[-300:], answers[1].returncode, answers[1].stderr[-300:]))

        # live view relayed: node 2's live stream of a source node 1 runs carries its frames
        remote = next((i for i, (owner, _) in before.items() if owner == "n1"), None)
        relayed = read_live(nodes[1].port, remote, seconds=8) if remote else []
        pictures = [cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR) for _, jpeg in relayed if jpeg]
        numbers = [event.get("frame") for event, jpeg in relayed if jpeg]
        check(f"n2's live stream (GET /api/v1/live?sources={remote}) relays the frames of {remote}, which n1 runs: "
              "detections with JPEGs OpenCV decodes at the video's 480x270, frame numbers rising",
              len(pictures) >= 20 and all(p is not None and p.shape[:2] == (270, 480) for p in pictures)
              and numbers == sorted(numbers) and all(event.get("source") == remote for event, _ in relayed),
              (remote, len(relayed), [event for event, _ in relayed[:3]], [None if p is None else p.shape for p in pictures[:3]]))

        # a demo video pulled through one node lands in the shared album: every node has it
        pulled = api(nodes[0].port, "POST", "/api/v1/samples/people-demo/pull")[0]
        cached = lambda node: any(s["name"] == "people-demo" and s.get("cached") for s in api(node.port, "GET", "/api/v1/samples")[1]["samples"])
        ok = pulled in (200, 202) and wait_until(lambda: all(cached(node) for node in nodes), 30)
        check("a demo video pulled through n1 lands in the shared album (--album/samples): n2 and n3 list it as downloaded",
              ok and glob.glob(os.path.join(album, "samples", "**", "people-demo.mkv"), recursive=True),
              (pulled, [api(node.port, "GET", "/api/v1/samples")[1] for node in nodes], os.listdir(album)))
        files_server.terminate()

        # PostgreSQL down for about 5 s: nothing moves, nothing stops
        running_before = {node.name: node.running() for node in nodes}
        frames_before = {i: node.metric(f'spotter_source_frames_total{{source="{i}"}}') for node in nodes for i in running_before[node.name]}
        database.stop()
        time.sleep(5)
        database.start()
        time.sleep(5 + 2)
        again = {line.split("|")[0]: (line.split("|")[1], int(line.split("|")[2]))
                 for line in database.rows("SELECT id, owner, generation FROM sources WHERE lease_expires > now()")}
        running_after = {node.name: node.running() for node in nodes}
        frames_after = {i: node.metric(f'spotter_source_frames_total{{source="{i}"}}') for node in nodes for i in running_after[node.name]}
        check("PostgreSQL down for 5 s and back: every lease renewed by its owner under the same generation, every source kept running",
              again == before and running_after == running_before
              and all((frames_after.get(i) or 0) > (frames_before.get(i) or 0) for i in frames_before), (before, again, running_before, running_after))
        before = again

        # failover
        counts = {node.name: sum(1 for owner, _ in before.values() if owner == node.name) for node in nodes}
        victim = max(nodes, key=lambda node: counts[node.name])
        survivors = [node for node in nodes if node is not victim]
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait()
        killed = time.time()

        def moved():
            running = {i for node in survivors for i, s in node.sources().items() if s.get("node") == node.name and s.get("state") == "running"}
            once = sorted(i for node in survivors for i in node.running()) == sorted(ids)
            return len(running) == 6 and once

        ok = wait_until(moved, 15, step=0.25)
        took = time.time() - killed
        check(f"kill -9 of {victim.name} ({counts[victim.name]} sources): within 15 s all six run on the other two", ok,
              {node.name: {i: (s.get("node"), s.get("state")) for i, s in node.sources().items()} for node in survivors})
        print(f"info  failover: {took:.1f} s from kill -9 to every source running again", flush=True)
        after = {line.split("|")[0]: (line.split("|")[1], int(line.split("|")[2])) for line in database.rows("SELECT id, owner, generation FROM sources")}
        takeovers = {line.split("|")[0]: int(line.split("|")[1]) for line in database.rows("SELECT name, takeovers FROM nodes")}
        metrics = {node.name: node.metric("spotter_cluster_takeovers_total") for node in survivors}
        check("each survivor's /metrics counts the takeovers the database records, and they add up to the killed node's sources",
              metrics == {name: takeovers[name] for name in metrics} and sum(metrics.values()) == counts[victim.name], (metrics, takeovers))
        moved_ids = [i for i, (owner, _) in before.items() if owner == victim.name]
        check("each moved source has a higher lease generation; the others kept theirs",
              all(after[i][1] > before[i][1] for i in moved_ids) and all(after[i] == before[i] for i in before if i not in moved_ids), (before, after))

        # a pause: SIGSTOP for 30 s, then SIGCONT
        paused, other = survivors
        held = [i for i, (owner, _) in after.items() if owner == paused.name]
        paused.process.send_signal(signal.SIGSTOP)
        time.sleep(30)
        during = {line.split("|")[0]: line.split("|")[1] for line in database.rows("SELECT id, owner FROM sources WHERE lease_expires > now()")}
        check(f"while {paused.name} is stopped (SIGSTOP, 30 s) its {len(held)} sources move to {other.name}",
              held and all(during.get(i) == other.name for i in held), during)
        mark = len(paused.output())
        paused.process.send_signal(signal.SIGCONT)
        woke = time.time()
        woke_at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(woke))

        # The woken node must stop each source under the lease it lost: it logs the generation it
        # lost when a renewal is refused, or that it stops everything when its first query after
        # waking timed out (no database for longer than the outage grace). Once it has, the nodes
        # may rebalance and hand some back to it under a new lease, so what counts is that each
        # runs on exactly one node, the one the database names.
        def stopped(i, log):
            return f"lost source {i} (generation {after[i][1]})" in log or f"stopping {len(held)} sources another node may have taken" in log

        def fenced():
            log = paused.output()[mark:]
            lost = all(stopped(i, log) for i in held)
            owners = {line.split("|")[0]: line.split("|")[1] for line in database.rows("SELECT id, owner FROM sources WHERE lease_expires > now()")}
            runs = {node.name: node.running() for node in survivors}
            once = all([name for name, mine in runs.items() if i in mine] == [owners.get(i)] for i in held)
            return lost and once

        ok = wait_until(fenced, 5 + 2, step=0.1)
        log = paused.output()[mark:]
        check(f"one lease period after SIGCONT {paused.name} has stopped each of them under the lease it lost; each runs on one node, its owner", ok,
              {"running": {node.name: sorted(node.running()) for node in survivors},
               "stopped": [i for i in held if stopped(i, log)], "log": log[-2000:]})
        print(f"info  the woken node let go {time.time() - woke:.1f} s after SIGCONT", flush=True)

        # events of every source on every node: the outbox's clip_finished rows against what the
        # never-stopped survivor's /api/v1/events sent
        time.sleep(OUTBOX_SETTLE)
        stream = streams[other.name]
        received = list(stream.clips)
        rows = [line.split("|", 1) for line in database.rows(
            "SELECT node, body FROM events WHERE type = 'clip_finished' AND at > to_timestamp(%f) AND at < now() - interval '%d seconds'"
            % (stream.opened + 1, OUTBOX_SETTLE - 1))]
        expected = [clip_name(body) for _, body in rows]
        elsewhere = [clip_name(body) for node, body in rows if node != other.name]
        check(f"/api/v1/events on {other.name} sent every clip_finished the outbox holds, once each, {len(elsewhere)} of them of sources other nodes ran",
              expected and elsewhere and set(expected) <= set(received) and len(received) == len(set(received)),
              {"missing": sorted(set(expected) - set(received)), "twice": sorted({c for c in received if received.count(c) > 1}),
               "outbox": len(expected), "received": len(received)})

        # shutdown
        codes = []
        for node in survivors:
            node.process.send_signal(signal.SIGTERM)
            try:
                codes.append(node.process.wait(timeout=30))
            except subprocess.TimeoutExpired:
                node.process.kill()
                codes.append("hung")
        check("SIGTERM ends the other nodes within 30 s (exit 0)", codes == [0, 0], codes)
        check("after they stop no lease is held and only the killed node is listed",
              database.rows("SELECT count(*) FROM sources WHERE owner IS NOT NULL AND lease_expires > now()") == ["0"]
              and database.rows("SELECT name FROM nodes") == [victim.name], database.rows("SELECT id, owner, lease_expires FROM sources"))
        # The shared album's index is in PostgreSQL (read here with psql); the album folder has no SQLite index.
        check("the album's rows are in PostgreSQL: the shared album folder has no SQLite index",
              not os.path.exists(os.path.join(album, "index.sqlite")), os.listdir(album))
        clips = database.rows("SELECT clip FROM clips WHERE NOT incomplete")
        size = database.rows("SELECT pg_total_relation_size('clips'), count(*) FROM clips")[0].split("|")
        print(f"info  clips table: {size[1]} rows, {int(size[0]) // max(1, int(size[1]))} bytes per row on disk with its indexes", flush=True)
        playable = [c for c in clips if subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-show_entries", "stream=nb_read_packets",
                                                        "-of", "csv=p=0", os.path.join(album, c)], capture_output=True, text=True).stdout.strip() not in ("", "0")]
        check("the shared album holds clips from the nodes, and every complete one plays (ffprobe)", clips and playable == clips, (clips, playable))
        announced = {clip_name(body) for body in database.rows("SELECT body FROM events WHERE type = 'clip_finished'")}
        rows = [(clip, source, node, int(generation) if generation else None, created, incomplete == "t") for clip, source, node, generation, created, incomplete
                in (line.split("|") for line in database.rows("SELECT clip, source_id, node, generation, created_at, incomplete FROM clips"))]
        complete = [row for row in rows if not row[5]]
        unannounced = [row[:5] for row in complete if os.path.basename(row[0]) not in announced]
        print(f"info  {len(complete)} complete clips, {len(complete) - len(unannounced)} announced through the outbox", flush=True)
        # Clip rows are fenced like events: a clip the paused node finished after its source moved
        # on has neither its row nor its event, and a repair indexes it as incomplete.
        check("every complete clip's clip_finished is in the outbox (the final ones at SIGTERM too)", complete and not unannounced, unannounced)
        lost = {(i, after[i][1]) for i in held}
        late = [row for row in rows if row[2] == paused.name and (row[1], row[3]) in lost and row[4] >= woke_at]
        print(f"info  {paused.name} finished {len(late)} clips under lost leases after waking, indexed by repairs: "
              f"{[(os.path.basename(r[0]), r[1], r[3]) for r in late]}", flush=True)
        check(f"every clip row names its source, node and lease generation; {paused.name}'s clips under the leases it lost, "
              "finished after waking, were refused their rows (indexed as incomplete by a repair)",
              rows and all(r[1] in ids and r[2] in ("n1", "n2", "n3") and isinstance(r[3], int) and r[3] >= 1 for r in rows)
              and all(r[5] for r in late),
              {"unnamed": [r for r in rows if not (r[1] in ids and r[2] in ("n1", "n2", "n3") and isinstance(r[3], int))], "late": late})

        def on_disk():
            return sorted(os.path.basename(c) for c in glob.glob(os.path.join(album, "clips", "*.mp4")))

        def packets(name):
            out = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-show_entries", "stream=nb_read_packets",
                                  "-of", "csv=p=0", os.path.join(album, "clips", name)], capture_output=True, text=True).stdout.strip()
            return int(out) if out.isdigit() else 0

        before = on_disk()
        readable = {name for name in before if packets(name) > 0}
        # the fresh node has a configuration file: its source becomes a cluster row once, however often it starts
        config = os.path.join(work, "cameras.json")
        with open(config, "w") as f:
            json.dump({"sources": [{"input": os.path.join(media, "cam1.mp4"), "loop": True, "realtime": True}]}, f)
        fresh = Node(spotter, "n4", album, media, database.url, work, extra=["--config", config])
        nodes.append(fresh)
        listed = []
        if wait_until(fresh.up, 60):
            status, answer = api(fresh.port, "GET", "/api/v1/album?limit=500")
            listed = sorted(os.path.basename(c.get("path") or c["url"]) for c in answer["clips"]) if status == 200 else [status, answer]
            check("the album API gives each clip its source_id, node and generation",
                  status == 200 and all(c.get("source_id") in ids and c.get("node") in ("n1", "n2", "n3") and c.get("generation", 0) >= 1
                                        for c in answer["clips"]), answer if status != 200 else [c for c in answer["clips"] if "node" not in c][:3])
        every = on_disk()
        check("a freshly started node lists every clip file in the album folder exactly once (the killed node's open clip as incomplete); "
              "it removed only files without a readable frame",
              every and every == listed and readable <= set(every),
              {"on disk, not listed": sorted(set(every) - set(listed)), "listed, not on disk": sorted(set(listed) - set(every)),
               "listed twice": sorted({c for c in listed if listed.count(c) > 1}), "readable, removed": sorted(readable - set(every))})
        configured = lambda: database.rows("SELECT id, owner FROM sources WHERE id LIKE 'c-%' AND lease_expires > now()")
        ran = wait_until(lambda: len(configured()) == 1 and configured()[0].endswith("|n4"), 20)
        second = Node(spotter, "n5", album, media, database.url, work, extra=["--config", config])
        nodes.append(second)
        wait_until(second.up, 60)
        time.sleep(3)
        check("a node's --config source is added to the cluster once and runs (a second node with the same file adds nothing)",
              ran and len(database.rows("SELECT id FROM sources WHERE id LIKE 'c-%'")) == 1,
              (database.rows("SELECT id, owner, settings FROM sources"), fresh.output()[-600:]))

        # `spotter album` on the shared folder: pointed at the database with --database, else told where the rows are
        plain = subprocess.run([spotter, "album", "list", album], capture_output=True, text=True, timeout=60)
        listed_cli = subprocess.run([spotter, "album", "list", album, "--database", database.url, "--json"], capture_output=True, text=True, timeout=60)
        cli_clips = sorted(json.loads(line)["clip"] for line in listed_cli.stdout.splitlines() if line.strip()) if listed_cli.returncode == 0 else []
        check("`spotter album list DIR --database URL` lists the rows psql reads; without --database it names the database and the option",
              cli_clips == sorted(database.rows("SELECT clip FROM clips")) and plain.returncode != 0 and "--database" in plain.stderr
              and "127.0.0.1" in plain.stderr, (plain.stderr[-300:], listed_cli.stderr[-300:], len(cli_clips)))
    finally:
        for node in nodes:
            if node.process.poll() is None:
                node.process.kill()
        database.stop()
        if os.environ.get("SPOTTER_KEEP_WORK"):
            print(f"info  kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
    sys.exit(summary())
