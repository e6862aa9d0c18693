#!/usr/bin/python3
"""A real RTSP camera for the tests: GStreamer's RTSP server (Debian's gir1.2-gst-rtsp-server-1.0,
with python3-gi and the GStreamer plugins scripts/setup.sh installs), serving an MPEG-TS file of
H.264 or H.265 at its own pace, over TCP or UDP as the client asks, optionally behind a user name
and password (basic authentication).

Usage: rtsp_server.py --port PORT --file VIDEO.ts [--codec h264|h265] [--user U --password P]
Prints one line `ready rtsp://127.0.0.1:PORT/cam` once it serves, then runs until killed.
Runs with Debian's /usr/bin/python3 (the GStreamer bindings are not on PyPI's Python).
"""
import argparse
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--file", required=True)
    parser.add_argument("--codec", choices=["h264", "h265"], default="h264")
    parser.add_argument("--user")
    parser.add_argument("--password")
    args = parser.parse_args()
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    factory = GstRtspServer.RTSPMediaFactory()
    parse, pay = ("h264parse", "rtph264pay") if args.codec == "h264" else ("h265parse", "rtph265pay")
    factory.set_launch(f"( filesrc location={args.file} ! tsdemux ! {parse} config-interval=-1 ! {pay} name=pay0 pt=96 config-interval=-1 )")
    factory.set_shared(True)
    if args.user:
        auth = GstRtspServer.RTSPAuth()
        token = GstRtspServer.RTSPToken()
        token.set_string("media.factory.role", "user")
        auth.add_basic(GstRtspServer.RTSPAuth.make_basic(args.user, args.password), token)
        server.set_auth(auth)
        permissions = GstRtspServer.RTSPPermissions()
        permissions.add_role_from_structure(
            Gst.Structure.new_from_string("user, media.factory.access=(boolean)true, media.factory.construct=(boolean)true"))
        factory.set_permissions(permissions)
    server.get_mount_points().add_factory("/cam", factory)
    if server.attach(None) == 0:
        print("cannot listen", flush=True)
        sys.exit(1)
    print(f"ready rtsp://127.0.0.1:{args.port}/cam", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
