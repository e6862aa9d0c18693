#!/usr/bin/env python3
"""`spotter serve` in a real browser: Debian's Chromium, driven by Selenium through Debian's
chromedriver (given by path, so Selenium never downloads a driver).

Records an album from the shared asl-walk.mkv with the built `spotter record`, serves it on
127.0.0.1, and checks in the browser that the album page lists the clip with its thumbnail, that a
clip plays in a <video> (readyState >= 2, currentTime advances), that a seek to the middle works,
and that deleting from the page removes the clip from the API. Writes screenshots to ARTIFACTS
(default .build/artifacts). Prints one line per check and `N passed, M failed`.

Usage: check_server.py SPOTTER_BINARY [--artifacts DIR]
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
MODEL = os.path.join(SHARED, "models", "coco-ssd-mobilenet-v1", "detect.tflite")
VIDEO = os.path.join(SHARED, "videos", "asl-walk.mkv")

passed = failed = 0


def check(name, condition, detail=""):
    global passed, failed
    if condition:
        passed += 1
        print(f"ok    {name}")
    else:
        failed += 1
        print(f"FAIL  {name} {detail}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spotter")
    parser.add_argument("--artifacts", default=os.path.join(ROOT, ".build", "artifacts"))
    args = parser.parse_args()
    os.makedirs(args.artifacts, exist_ok=True)
    work = tempfile.mkdtemp(prefix="spotter-serve-")
    album = os.path.join(work, "album")
    subprocess.run([args.spotter, "record", VIDEO, "--album", album, "--model", MODEL], check=True, capture_output=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([args.spotter, "serve", "--album", album, "--port", str(port), "--model", MODEL],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    driver = None
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
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
    except Exception as error:  # a browser or server failure is a failed check, with what it said
        check("browser session", False, f"{type(error).__name__}: {error}")
    finally:
        if driver:
            driver.quit()
        server.terminate()
        try:
            _, errors = server.communicate(timeout=10)
            check("SIGTERM stops the server gracefully", server.returncode == 0, errors[-500:])
        except subprocess.TimeoutExpired:
            server.kill()
            check("SIGTERM stops the server gracefully", False, "still running after 10 s")
        shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
