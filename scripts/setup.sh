#!/usr/bin/env bash
# Installs everything Spotter's build, tests and benchmarks need; safe to run again (it only
# installs what is missing).
#   - Debian packages: XNNPACK + pthreadpool (kernels), FFmpeg with libx264 (media), FreeType and
#     DejaVu fonts (labels), SQLite (the album index, and the sqlite3 CLI the tests read it with),
#     libcurl and zlib (the model store's downloads and zip archives)
#   - libjpeg-turbo (JPEG decoding with OpenCV's settings)
#   - Chromium and its WebDriver (the browser that tests `spotter serve`'s pages)
#   - GStreamer's RTSP server with its Python bindings and codecs (a real RTSP camera for the tests)
#   - a Python venv with LiteRT, OpenCV, NumPy and Pillow (the peer in ../shared/reference, and the tool
#     that produces expected outputs for the tests), at $SPOTTER_REF_VENV
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(pkg-config curl libcurl4-openssl-dev zlib1g-dev libxnnpack-dev libpthreadpool-dev libavformat-dev libavcodec-dev libswscale-dev
          libavutil-dev libavdevice-dev ffmpeg libfreetype-dev fonts-dejavu-core libjpeg62-turbo-dev libsqlite3-dev sqlite3 python3-venv
          chromium chromium-driver wrk postgresql
          gir1.2-gst-rtsp-server-1.0 python3-gi gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
          gstreamer1.0-plugins-ugly)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v swift >/dev/null || { echo "setup: Swift 6 is required (swift not on PATH)" >&2; exit 1; }

venv="${SPOTTER_REF_VENV:-$HOME/.cache/spotter-ref-venv}"
requirements="../shared/reference/requirements.txt"
[ -f "$requirements" ] || { echo "setup: $requirements not found: ../shared must sit beside the repository" >&2; exit 1; }
stamp="$venv/.spotter-requirements"
# The peer's packages, plus Pillow for fixtures OpenCV cannot write (CMYK JPEGs, EXIF orientation)
# Selenium to drive Debian's Chromium (given /usr/bin/chromedriver, so it never downloads one), and
# jsonschema to check the server's answers against the schemas of its OpenAPI document.
wanted=$(cat "$requirements" scripts/requirements-fixtures.txt)
if ! [ -x "$venv/bin/python" ] || [ "$wanted" != "$(cat "$stamp" 2>/dev/null)" ]; then
  echo "setup: creating the LiteRT venv at $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements" -r scripts/requirements-fixtures.txt
  printf '%s' "$wanted" > "$stamp"
fi
echo "setup: ok"
