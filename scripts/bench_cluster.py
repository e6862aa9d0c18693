#!/usr/bin/env python3
"""Failover time and database load of `spotter serve --database` (issue 37), on a throwaway
PostgreSQL (the classes of check_cluster.py) with three nodes and six looping file sources.

  failover    kill -9 of the node with the most sources, to the first frame a moved source
              analyses on another node (its /metrics frame counter), over --trials trials; the
              killed node is started again between trials and the sources spread back
  load        transactions per second the cluster's database commits while the six sources run
              (pg_stat_database), per camera

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
import urllib.request

from check_cluster import VIDEO, Node, Postgres, api
from checklib import wait_until


def frames(node, source):
    value = None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/metrics", timeout=2) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(f'spotter_source_frames_total{{source="{source}"}} '):
                    value = int(line.split()[1])
    except Exception:
        pass
    return value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("spotter")
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    spotter = os.path.abspath(args.spotter)
    work = tempfile.mkdtemp(prefix="spotter-bench-cluster-")
    os.chmod(work, 0o755)
    database = Postgres(work)
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
        ids = [api(nodes[0].port, "POST", "/api/v1/sources", {"input": os.path.join(media, f"cam{i}.mp4"), "loop": True, "realtime": True,
                                                              "record": True})[1]["id"] for i in range(1, 7)]

        def spread():
            owners = [line.split("|") for line in database.rows("SELECT id, owner FROM sources WHERE lease_expires > now()")]
            return len(owners) == 6 and {owner for _, owner in owners} == {node.name for node in nodes if node.process.poll() is None}

        assert wait_until(spread, 60), "the sources did not spread"
        # load: the database's commits over 30 s while six sources run at 10 fps
        def commits():
            return int(database.rows("SELECT xact_commit FROM pg_stat_database WHERE datname = 'spotter'")[0])
        start, began = commits(), time.time()
        time.sleep(30)
        rate = (commits() - start) / (time.time() - began)
        print(f"load: {rate:.1f} transactions/s with 3 nodes and 6 cameras at 10 fps ({rate / 6:.2f} per camera; "
              f"the lease rounds: heartbeat, renew, placement every 1.7 s per node)", flush=True)

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
        print(f"failover over {len(times)} trials: median {statistics.median(times):.2f} s, max {max(times):.2f} s"
              + ("" if len(finite) == len(times) else f" ({len(times) - len(finite)} never came back within 30 s)"), flush=True)
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
