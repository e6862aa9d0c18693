#!/usr/bin/env python3
"""The peer's clips of the shared person video, for the recording tests: runs
../shared/reference/pipeline_py.py --record-persons on videos/one-by-one-person-detection.mp4 (LiteRT,
score 0.5, 5 s tail) and writes fixtures-generated/recording/peer-clips.json: the video's size and
frame rate as OpenCV reads them, and each clip's first and last frame and times. The tests compare
Spotter's clips with these, so they hold for whatever video the shared folder has.

    ~/.cache/spotter-ref-venv/bin/python scripts/make_recording_fixtures.py
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
VIDEO = os.path.join(SHARED, "videos", "one-by-one-person-detection.mp4")
OUT = os.path.join(ROOT, "fixtures-generated", "recording")


def main():
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="spotter-peer-clips-") as folder:
        summary_path = os.path.join(folder, "summary.json")
        peer = [sys.executable, os.path.join(SHARED, "reference", "pipeline_py.py"), VIDEO,
                "--record-persons", os.path.join(folder, "clips"), "--json", summary_path]
        result = subprocess.run(peer, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"make_recording_fixtures: the peer failed on {VIDEO}:\n{result.stderr[-2000:]}")
        with open(summary_path) as f:
            summary = json.load(f)
    clips = [{key: clip[key] for key in ("start_frame", "end_frame", "start_s", "end_s", "frames")} for clip in summary["clips"]]
    fixture = {"video": os.path.basename(VIDEO), "width": summary["width"], "height": summary["height"], "fps": summary["src_fps"], "clips": clips}
    temporary = os.path.join(OUT, "peer-clips.json.partial")
    with open(temporary, "w") as f:
        json.dump(fixture, f, indent=1)
    os.replace(temporary, os.path.join(OUT, "peer-clips.json"))
    print(f"make_recording_fixtures: {len(clips)} peer clips of {os.path.basename(VIDEO)} in {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
