#!/usr/bin/env python3
"""`spotter serve` in a real browser: Debian's Chromium, driven by Selenium through Debian's
chromedriver (given by path, so Selenium never downloads a driver).

Records an album from the shared asl-walk.mkv with the built `spotter record`, serves it on
127.0.0.1, and checks in the browser that the album page lists the clip with its thumbnail, that a
clip plays in a <video> (readyState >= 2, currentTime advances), that a seek to the middle works,
and that deleting from the page removes the clip from the API. Then the live page of a source fed
by the shared person video at real-time pace (boxes within 2 px of the detection JSON of the frame
shown, recording indicator, decode-to-display latency), the live stream read outside the browser
(JPEGs OpenCV decodes, a slow reader skipping frames), a page found by a source with rectangles on
and outlined on the live page, the demo-videos page (a download from a
loopback server with its progress bar, processing, an upload), and SIGTERM while two sources record
(every clip complete after a restart). Writes screenshots to ARTIFACTS (default .build/artifacts).
Prints one line per check and `N passed, M failed`.

Usage: check_server.py SPOTTER_BINARY [--artifacts DIR]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import cv2
import numpy as np
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from checklib import MODEL, ROOT, SHARED, check, free_port, serve_sample, summary

VIDEO = os.path.join(SHARED, "videos", "asl-walk.mkv")
LIVE_VIDEO = os.path.join(SHARED, "videos", "one-by-one-person-detection.mp4")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--artifacts", default=os.path.join(ROOT, ".build", "artifacts"))
    args = parser.parse_args()
    os.makedirs(args.artifacts, exist_ok=True)
    work = tempfile.mkdtemp(prefix="spotter-serve-")
    album = os.path.join(work, "album")
    subprocess.run([args.spotter, "record", VIDEO, "--album", album, "--model", MODEL], check=True, capture_output=True)
    # The demo-videos page pulls its sample from this loopback server, through a catalog naming it.
    files_server, catalog = serve_sample(work, "walk-demo", route="crawl")
    environment = dict(os.environ, SPOTTER_CATALOG=catalog, XDG_CACHE_HOME=os.path.join(work, "cache"))
    server, base = start_server(args.spotter, album, environment)
    driver = None
    try:
        clips = json.load(urllib.request.urlopen(base + "/api/v1/album"))["clips"]
        check("the API lists the recorded clip", len(clips) == 1, clips)

        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
                     "--autoplay-policy=no-user-gesture-required", "--mute-audio"]:
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        driver.set_page_load_timeout(30)
        driver.get(base + "/album")
        wait = WebDriverWait(driver, 20)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".clip"))
        cards = driver.find_elements(By.CSS_SELECTOR, ".clip")
        check("the album page shows one clip card", len(cards) == 1)
        loaded = driver.execute_script("const i = document.querySelector('.clip img'); return i.complete && i.naturalWidth;")
        check("its thumbnail loads, 320 px wide", loaded == 320, loaded)
        labels = cards[0].find_element(By.CSS_SELECTOR, ".labels").text
        check("the card names the label", "person" in labels, labels)
        driver.save_screenshot(os.path.join(args.artifacts, "album.png"))

        cards[0].find_element(By.CSS_SELECTOR, ".actions button").click()
        wait.until(lambda d: d.execute_script("return document.getElementById('video').readyState") >= 2)
        check("the clip plays in a <video> (readyState >= 2)", True)
        first = driver.execute_script("return document.getElementById('video').currentTime")
        time.sleep(1.0)
        later = driver.execute_script("return document.getElementById('video').currentTime")
        check("currentTime advances", later > first, f"{first} -> {later}")
        duration = driver.execute_script("return document.getElementById('video').duration")
        driver.execute_script("const v = document.getElementById('video'); v.pause(); v.currentTime = v.duration / 2;")
        wait.until(lambda d: d.execute_script("const v = document.getElementById('video'); return !v.seeking && v.readyState >= 2"))
        middle = driver.execute_script("return document.getElementById('video').currentTime")
        check("a seek to the middle lands there", abs(middle - duration / 2) < 0.5, f"{middle} of {duration}")
        driver.save_screenshot(os.path.join(args.artifacts, "album-playing.png"))

        driver.execute_script("window.confirm = () => true;")
        cards[0].find_elements(By.CSS_SELECTOR, ".actions button")[1].click()
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".clip"))
        clips = json.load(urllib.request.urlopen(base + "/api/v1/album"))["clips"]
        check("Delete on the page removes the clip from the index", clips == [], clips)

        live_view(driver, base, args.artifacts)
        live_stream(base)
        live_rectangles(driver, base, args.artifacts, work)
        live_objects(driver, base, args.artifacts)
        demo_videos(driver, base, args.artifacts)
        pages_fit_phones(driver, base, args.artifacts)
    except Exception as error:  # a browser or server failure is a failed check, with what it said
        check("browser session", False, f"{type(error).__name__}: {error}")
        if driver:
            driver.save_screenshot(os.path.join(args.artifacts, "failure.png"))
            for entry in driver.get_log("browser")[-10:]:
                print(f"      browser console: {entry['level']} {entry['message'][:300]}")
    finally:
        if driver:
            driver.quit()
        files_server.terminate()
        server.terminate()
        try:
            _, errors = server.communicate(timeout=10)
            check("SIGTERM stops the server gracefully", server.returncode == 0, errors[-500:])
        except subprocess.TimeoutExpired:
            server.kill()
            check("SIGTERM stops the server gracefully", False, "still running after 10 s")
        try:
            sigterm_while_recording(args.spotter, album)
        except Exception as error:
            check("SIGTERM while recording", False, f"{type(error).__name__}: {error}")
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(summary())


def api(base, path, body=None, method=None):
    request = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        data = response.read()
        return json.loads(data) if data else None


def live_view(driver, base, artifacts):
    """A source fed by the shared person video at real-time pace: boxes over the live picture where
    the detection JSON of that frame says, a recording indicator while a clip is open, latency."""
    source = api(base, "/api/v1/sources", {"input": LIVE_VIDEO, "realtime": True, "record": True})
    check("POST /api/v1/sources answers the new source's id", isinstance(source.get("id"), str), source)
    driver.get(base + "/live")
    wait = WebDriverWait(driver, 60)
    # The first person walks in within the first seconds of the video.
    wait.until(lambda d: d.execute_script(
        "const s = window.spotter.shown[arguments[0]]; return s && s.detections.length > 0 && !document.querySelector('.rec').hidden",
        source["id"]))
    measured = driver.execute_script("""
        const c = document.querySelector('.source');
        const d = window.spotter.shown[c.dataset.id];
        const img = c.querySelector('.view img').getBoundingClientRect();
        const boxes = [...c.querySelectorAll('.box')].map(b => {
          const r = b.getBoundingClientRect();
          return { frame: Number(b.dataset.frame), left: r.left - img.left, top: r.top - img.top, right: r.right - img.left, bottom: r.bottom - img.top };
        });
        return { d, boxes, scale: img.width / d.width };""")
    event, boxes, scale = measured["d"], measured["boxes"], measured["scale"]
    worst = 0.0
    for box, detection in zip(boxes, event["detections"]):
        expected = [detection["box"][k] * scale for k in ("xmin", "ymin", "xmax", "ymax")]
        worst = max(worst, *(abs(a - b) for a, b in zip([box["left"], box["top"], box["right"], box["bottom"]], expected)))
    check("the live page draws one box per detection of the frame it shows",
          len(boxes) == len(event["detections"]) and all(b["frame"] == event["frame"] for b in boxes), measured)
    check("box positions match the detection JSON within 2 px", worst <= 2, f"worst {worst:.2f} px")
    status = api(base, f"/api/v1/sources/{source['id']}")
    check("the recording indicator shows while the API says a clip is open", status["recording"] is True, status)
    driver.save_screenshot(os.path.join(artifacts, "live.png"))
    time.sleep(8)
    latencies = driver.execute_script("return window.spotter.latencies[arguments[0]]", source["id"]) or []
    latencies = sorted(latencies)
    p50 = latencies[len(latencies) // 2] if latencies else None
    p95 = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))] if latencies else None
    print(f"      live view: {len(latencies)} frames shown, decode-to-display latency p50 {p50} ms, p95 {p95} ms")
    check("decode-to-display latency p95 <= 200 ms", p95 is not None and p95 <= 200, f"p95 {p95} ms")
    snapshot = urllib.request.urlopen(f"{base}/api/v1/sources/{source['id']}/snapshot.jpg", timeout=10).read()
    check("the snapshot endpoint answers a JPEG", snapshot[:3] == b"\xff\xd8\xff", snapshot[:8])
    api(base, f"/api/v1/sources/{source['id']}", method="DELETE")
    clips = api(base, "/api/v1/album?source=" + urllib.parse.quote(LIVE_VIDEO))["clips"]
    check("removing the source finishes its open clip into the album", len(clips) >= 1 and not any(c["incomplete"] for c in clips), clips)


def live_stream(base):
    """GET /api/v1/live read outside the browser: every detection line is followed by a JPEG that
    OpenCV decodes to the frame's size, the same bytes as that frame's own URL; a reader slower
    than the source skips frames and stays a bounded time behind instead of falling further back."""
    source = api(base, "/api/v1/sources", {"input": LIVE_VIDEO, "realtime": True, "loop": True, "record": False})["id"]
    host, port = base.split("//")[1].split(":")

    def open_stream(receive_buffer=None):
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        connection.connect()
        if receive_buffer:
            connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        connection.request("GET", f"/api/v1/live?sources={source}&types=detection")
        return connection, connection.getresponse()

    def next_frame(stream):
        while True:
            event = json.loads(stream.readline())
            if event.get("jpeg_bytes"):
                return event, stream.read(event["jpeg_bytes"])

    connection, stream = open_stream()
    check("the live stream answers 200 with its media type",
          stream.status == 200 and stream.getheader("Content-Type") == "application/vnd.spotter.live", stream.getheaders())
    frames, same, sized = [], 0, 0
    for _ in range(20):
        event, jpeg = next_frame(stream)
        frames.append(event["frame"])
        picture = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        sized += picture is not None and picture.shape[:2] == (event["height"], event["width"])
        try:
            same += urllib.request.urlopen(base + event["image_url"], timeout=10).read() == jpeg
        except urllib.error.HTTPError:
            pass  # only the last few frames stay available by URL
    connection.close()
    check("every streamed frame is a JPEG that OpenCV decodes to the frame's size", sized == 20, f"{sized} of 20")
    check("frames arrive in order, as the same bytes as their URLs",
          frames == sorted(set(frames)) and same >= 15, f"frames {frames}, {same} of 20 equal")

    connection, stream = open_stream(receive_buffer=32768)
    seen = []
    started = time.time()
    while time.time() - started < 12:
        event, _ = next_frame(stream)
        seen.append((event["frame"], time.time() * 1000 - event["decoded_at"]))
        time.sleep(0.5)  # a reader at 2 frames a second, against a 10 fps source
    connection.close()
    gaps = [b[0] - a[0] for a, b in zip(seen, seen[1:])]
    last = seen[-1][1]
    print(f"      slow reader: {len(seen)} frames in 12 s, largest gap {max(gaps)} frames, last frame {last:.0f} ms old")
    check("a slow reader skips frames and stays under 5 s behind", max(gaps) >= 5 and last < 5000, seen)
    api(base, f"/api/v1/sources/{source}", method="DELETE")


def live_rectangles(driver, base, artifacts, work):
    """A source with "rectangles": true, fed by a video of a page in perspective on a photo (drawn
    here with OpenCV, corners known): the detection events carry the page's corners, and the live
    page outlines it through those corners."""
    background = cv2.resize(cv2.imread(os.path.join(SHARED, "images", "coffee.png")), (640, 360))
    page = np.full((300, 220, 3), 235, np.uint8)
    for y in range(30, 270, 18):
        cv2.line(page, (20, y), (200, y), (60, 60, 60), 2)
    truth = np.float32([[230, 60], [430, 80], [420, 320], [210, 300]])
    warp = cv2.getPerspectiveTransform(np.float32([[0, 0], [220, 0], [220, 300], [0, 300]]), truth)
    warped = cv2.warpPerspective(page, warp, (640, 360))
    mask = cv2.warpPerspective(np.full((300, 220), 255, np.uint8), warp, (640, 360))
    background[mask > 127] = warped[mask > 127]
    picture, video = os.path.join(work, "page.png"), os.path.join(work, "page.mp4")
    cv2.imwrite(picture, background)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-loop", "1", "-i", picture, "-t", "3", "-r", "10", "-c:v", "libx264",
                    "-pix_fmt", "yuv420p", video], check=True)
    source = api(base, "/api/v1/sources", {"input": video, "realtime": True, "loop": True, "record": False, "classes": [],
                                           "rectangles": True})["id"]
    driver.get(base + "/live?source=" + source)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "const s = window.spotter.shown[arguments[0]]; return s && (s.rectangles || []).length > 0", source))
    measured = driver.execute_script("""
        const c = document.querySelector('.source');
        const d = window.spotter.shown[c.dataset.id];
        const img = c.querySelector('.view img').getBoundingClientRect();
        const quads = [...c.querySelectorAll('.quads polygon')].map(q => ({ frame: Number(q.dataset.frame),
          points: [...q.points].map(p => { const m = q.getScreenCTM(); return [p.x * m.a + m.e - img.left, p.y * m.d + m.f - img.top]; }) }));
        return { d, quads, scale: img.width / d.width };""")
    event, quads, scale = measured["d"], measured["quads"], measured["scale"]
    corners = np.array(event["rectangles"][0]["corners"])
    diagonal = np.linalg.norm(truth[2] - truth[0])
    error = np.linalg.norm(corners - (truth + 0.5), axis=1).max() / diagonal
    check("the detection event carries the page's corners (within 5% of its diagonal)", error <= 0.05, f"{corners.tolist()}, error {error:.3f}")
    drawn = np.array(quads[0]["points"]) if quads else None
    worst = float(np.abs(drawn - corners * scale).max()) if drawn is not None and drawn.shape == (4, 2) else float("inf")
    check("the live page outlines the rectangle through the event's corners (2 px), on the frame they belong to",
          len(quads) == len(event["rectangles"]) and quads[0]["frame"] == event["frame"] and worst <= 2, f"{quads}, worst {worst}")
    driver.save_screenshot(os.path.join(artifacts, "live-rectangles.png"))
    api(base, f"/api/v1/sources/{source}", method="DELETE")


def live_objects(driver, base, artifacts):
    """Objects over time on the live page (issue 33): tracked boxes carry `#ID label score` with the
    event's track id; a zone and a line drawn by clicking on the picture are saved on the source and
    drawn over it; the line's counter goes up when a person of the shared video walks across it."""
    source = api(base, "/api/v1/sources", {"input": LIVE_VIDEO, "realtime": True, "record": False, "classes": ["person"]})["id"]
    driver.get(base + "/live?source=" + source)
    wait = WebDriverWait(driver, 60)
    wait.until(lambda d: d.execute_script("return document.querySelector('.source .box[data-track]') !== null"))
    tagged = driver.execute_script("""
        const c = document.querySelector('.source');
        const d = window.spotter.shown[c.dataset.id];
        return { tracks: d.detections.map(x => x.track), boxes: [...c.querySelectorAll('.box')].map(b => ({ track: b.dataset.track, text: b.textContent })) };""")
    good = [b for b in tagged["boxes"] if b["track"] and re.fullmatch(r"#\d+ person 0\.\d\d", b["text"].strip())]
    check("the live page shows each tracked person as '#ID person 0.NN', with the event's track id",
          good and all(int(b["track"]) in tagged["tracks"] for b in good), tagged)

    def click(x, y):
        # (x, y) in the frame's pixels, clicked where the picture shows them.
        driver.execute_script("""
            const c = document.querySelector('.source'); const r = c.querySelector('.view img').getBoundingClientRect();
            const scale = r.width / window.spotter.shown[c.dataset.id].width;
            const at = { clientX: r.left + arguments[0] * scale, clientY: r.top + arguments[1] * scale, bubbles: true };
            c.querySelector('.view').dispatchEvent(new MouseEvent('click', at));""", x, y)

    driver.execute_script("window.prompt = () => arguments[0]", "door")
    driver.find_element(By.CSS_SELECTOR, ".source .draw-zone").click()
    for x, y in [(520, 200), (760, 200), (760, 430), (520, 430)]:
        click(x, y)
    driver.find_element(By.CSS_SELECTOR, ".source .finish-zone").click()
    wait.until(lambda d: api(base, f"/api/v1/sources/{source}").get("zones", {}).get("zones"))
    driver.execute_script("window.prompt = () => arguments[0]", "gate")
    driver.find_element(By.CSS_SELECTOR, ".source .draw-line").click()
    click(500, 10)
    click(500, 425)
    wait.until(lambda d: api(base, f"/api/v1/sources/{source}").get("zones", {}).get("lines"))
    layout = api(base, f"/api/v1/sources/{source}")["zones"]
    polygon = layout["zones"][0]["polygon"]
    line = layout["lines"][0]
    check("a zone clicked on the picture is saved on the source, in frame pixels (2 px)",
          layout["zones"][0]["name"] == "door" and len(polygon) == 4
          and max(abs(a - b) for p, q in zip(polygon, [(520, 200), (760, 200), (760, 430), (520, 430)]) for a, b in zip(p, q)) <= 2, layout)
    check("a line clicked on the picture is saved too", line["name"] == "gate" and abs(line["from"][0] - 500) <= 2 and abs(line["to"][1] - 425) <= 2, layout)
    wait.until(lambda d: d.execute_script("return document.querySelectorAll('.source .zones polygon[data-zone=door], .source .zones polyline[data-line=gate]').length") == 2)
    check("the zone and the line are drawn over the picture", True)
    driver.save_screenshot(os.path.join(artifacts, "live-zones.png"))
    # Everyone walks left to right: across a line drawn top to bottom, from side R to side L ("out").
    WebDriverWait(driver, 120).until(lambda d: json.loads(d.execute_script(
        "return document.querySelector('.source .counts').dataset.totals || '{}'")).get("gate out", 0) >= 1)
    shown = driver.execute_script("return document.querySelector('.source .counts').textContent")
    counts = api(base, f"/api/v1/counts?source={source}")["counts"]
    crossed = sum(c["count"] for c in counts if c.get("kind") == "line" and c["name"] == "gate" and c.get("direction") == "out")
    check("the page's counter goes up when a person crosses the line, as /api/v1/counts says", "gate out" in shown and crossed >= 1,
          f"page {shown!r}, API {counts}")
    driver.save_screenshot(os.path.join(artifacts, "live-counts.png"))
    api(base, f"/api/v1/sources/{source}", method="DELETE")


def demo_videos(driver, base, artifacts):
    """The demo-videos page downloads a sample from the loopback server with a visible progress bar,
    then processes it as a job whose clips land in the album."""
    driver.get(base + "/samples")
    wait = WebDriverWait(driver, 60)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-name='walk-demo'] button.download"))
    row = driver.find_element(By.CSS_SELECTOR, "tr[data-name='walk-demo']")
    check("the demo page lists the sample as not downloaded", "not downloaded" in row.find_element(By.CSS_SELECTOR, ".status").text)
    row.find_element(By.CSS_SELECTOR, "button.download").click()
    wait.until(lambda d: d.execute_script("const p = document.querySelector(\"tr[data-name='walk-demo'] progress\"); return !p.hidden && p.value > 0"))
    driver.save_screenshot(os.path.join(artifacts, "demo-videos.png"))
    wait.until(lambda d: "cached" in d.find_element(By.CSS_SELECTOR, "tr[data-name='walk-demo'] .status").text)
    seen = driver.execute_script("return window.spotter.progress['walk-demo'] || []")
    check("the progress bar showed the download partway", any(0 < (v or 0) < 100 for v in seen), seen)
    samples = api(base, "/api/v1/samples")["samples"]
    check("the API says the sample is cached", any(s["name"] == "walk-demo" and s["cached"] for s in samples), samples)
    driver.find_element(By.CSS_SELECTOR, "tr[data-name='walk-demo'] button.process").click()
    wait.until(lambda d: "/live?source=" in d.current_url)
    source = driver.current_url.rsplit("=", 1)[-1]
    wait.until(lambda d: api(base, f"/api/v1/sources/{source}")["state"] == "finished")
    status = api(base, f"/api/v1/sources/{source}")
    check("processing the sample runs it to the end as a job", status["percent"] == 100 and status["clips"] >= 1, status)
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, ".source .clips").text.endswith(("clip", "clips")))
    driver.save_screenshot(os.path.join(artifacts, "processing.png"))
    driver.find_element(By.CSS_SELECTOR, ".source .clips").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".clip"))
    cards = driver.find_elements(By.CSS_SELECTOR, ".clip")
    check("its clips link opens the album filtered to them", len(cards) == status["clips"], (len(cards), status["clips"]))

    # Your own video: uploaded from the page, then processed as a job.
    driver.get(base + "/samples")
    wait.until(lambda d: d.find_elements(By.ID, "file"))
    driver.find_element(By.ID, "file").send_keys(os.path.join(SHARED, "videos", "asl-again.mkv"))
    driver.find_element(By.CSS_SELECTOR, "#upload button").click()
    wait.until(lambda d: "/live?source=" in d.current_url)
    source = driver.current_url.rsplit("=", 1)[-1]
    wait.until(lambda d: api(base, f"/api/v1/sources/{source}")["state"] in ("finished", "failed"))
    status = api(base, f"/api/v1/sources/{source}")
    check("an uploaded video is processed into clips", status["state"] == "finished" and status["clips"] >= 1
          and status["input"].endswith("/uploads/asl-again.mkv"), status)


def pages_fit_phones(driver, base, artifacts):
    """Every page at 1280x800 and at a phone's 390x844: nothing wider than the viewport (no
    horizontal scrolling); on the live page, the label of a box touching the frame's top edge (a
    person close to the camera) is drawn inside it, visible; a source's Edit and Pause work."""
    for earlier in api(base, "/api/v1/sources")["sources"]:
        api(base, f"/api/v1/sources/{earlier['id']}", method="DELETE")
    source = api(base, "/api/v1/sources", {"input": LIVE_VIDEO, "realtime": True, "loop": True, "record": False})["id"]
    overflow = """
        const width = document.documentElement.clientWidth;
        const wide = [...document.querySelectorAll('body *')].filter(e => {
          const r = e.getBoundingClientRect(); return r.width > 0 && r.right > width + 1; }).map(e => e.tagName + '.' + e.className);
        return { scroll: document.documentElement.scrollWidth, width, wide: wide.slice(0, 5) };"""
    for width, height, mobile in [(1280, 800, False), (390, 844, True)]:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
        for page in ["/live", "/album", "/samples", "/login"]:
            driver.get(base + page)
            WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")
            if page == "/live":
                WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, f".source[data-id='{source}'] .view img[src^='blob:']"),
                                                message=f"no frame of {source} on /live")
            time.sleep(0.5)
            measured = driver.execute_script(overflow)
            check(f"{page} fits {width}x{height} (no horizontal overflow)", measured["scroll"] <= measured["width"] and not measured["wide"],
                  measured)
            driver.save_screenshot(os.path.join(artifacts, f"{page.strip('/')}-{width}x{height}.png"))
        # A person box from the frame's top edge: its label stays inside the picture.
        driver.get(base + f"/live?source={source}")
        WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".source .view img[src^='blob:']"))
        placed = driver.execute_script("""
            const c = document.querySelector('.source');
            const img = c.querySelector('.view img');
            window.spotter.paused = true;
            drawBoxes(cards[c.dataset.id], { frame: 1, width: img.naturalWidth, height: img.naturalHeight,
              detections: [{ label: 'person', score: 0.9, box: [img.naturalWidth * 0.3, 0, img.naturalWidth * 0.6, img.naturalHeight * 0.9] }] });
            const tag = c.querySelector('.overlay .box span, .box span').getBoundingClientRect();
            const view = c.querySelector('.view').getBoundingClientRect();
            return { tagTop: tag.top, tagBottom: tag.bottom, viewTop: view.top };""")
        check(f"at {width}x{height} a box touching the top edge shows its label inside the picture", placed["tagTop"] >= placed["viewTop"] - 0.5,
              placed)
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    # Edit and Pause on the page.
    driver.get(base + f"/live?source={source}")
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".source .pause"))
    driver.find_element(By.CSS_SELECTOR, ".source .pause").click()
    WebDriverWait(driver, 20).until(lambda d: api(base, f"/api/v1/sources/{source}")["state"] == "paused")
    driver.find_element(By.CSS_SELECTOR, ".source .edit-button").click()
    form = driver.find_element(By.CSS_SELECTOR, ".source form.edit")
    form.find_element(By.NAME, "classes").clear()
    form.find_element(By.NAME, "classes").send_keys("person, cup")
    form.find_element(By.TAG_NAME, "button").click()
    WebDriverWait(driver, 20).until(lambda d: api(base, f"/api/v1/sources/{source}")["classes"] == ["cup", "person"])
    check("Pause and Edit on the live page change the source", api(base, f"/api/v1/sources/{source}")["paused"])
    driver.execute_script("window.confirm = () => true;")
    driver.find_element(By.CSS_SELECTOR, ".source .remove").click()
    WebDriverWait(driver, 20).until(lambda d: source not in [s["id"] for s in api(base, "/api/v1/sources")["sources"]])
    check("Remove (after confirming) removes the source", True)


def start_server(spotter, album, environment=None):
    """`spotter serve` on a free loopback port, once /health answers."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # Sources added through the API may open the shared videos and the videos this script makes
    # beside the album (and, as always, the album's uploads).
    server = subprocess.Popen([spotter, "serve", "--album", album, "--port", str(port), "--model", MODEL,
                               "--media-dir", os.path.join(SHARED, "videos"), "--media-dir", os.path.dirname(album)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment)
    for _ in range(100):
        try:
            urllib.request.urlopen(base + "/health", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    return server, base


def sigterm_while_recording(spotter, album):
    """SIGTERM with two sources mid-clip: exit 0, every clip complete and readable by ffprobe, and a
    restarted server lists the same album."""
    server, base = start_server(spotter, album)
    try:
        ids = [api(base, "/api/v1/sources", {"input": LIVE_VIDEO, "realtime": True})["id"] for _ in range(2)]
        deadline = time.time() + 60
        while time.time() < deadline and not all(api(base, f"/api/v1/sources/{i}")["recording"] for i in ids):
            time.sleep(0.2)
        check("two sources record at once", all(api(base, f"/api/v1/sources/{i}")["recording"] for i in ids))
    finally:
        server.terminate()
        _, errors = server.communicate(timeout=30)
    check("SIGTERM while recording exits 0", server.returncode == 0, errors[-500:])
    server, base = start_server(spotter, album)
    try:
        clips = api(base, "/api/v1/album?source=" + urllib.parse.quote(LIVE_VIDEO))["clips"]
        complete = [c for c in clips if not c["incomplete"]]
        frames = []
        for clip in complete:
            path = os.path.join(album, "clips", clip["url"].rsplit("/", 1)[-1])
            out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                  "stream=nb_read_frames", "-of", "csv=p=0", path], capture_output=True, text=True).stdout.strip()
            frames.append((clip["frames"], int(out or 0)))
        check("after a restart the album lists every clip, complete, with the frames ffprobe counts",
              len(clips) >= 3 and len(complete) == len(clips) and all(a == b for a, b in frames), (len(clips), frames))
    finally:
        server.terminate()
        server.communicate(timeout=30)


if __name__ == "__main__":
    main()
