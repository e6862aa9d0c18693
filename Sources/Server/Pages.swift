/// The server's pages: plain HTML and a little JavaScript over the JSON API, no build step.
enum Pages {
    static let style = """
        <style>
          body { font: 15px/1.4 system-ui, sans-serif; margin: 0; background: #111; color: #eee; }
          header { padding: 12px 20px; background: #1d1d1d; display: flex; gap: 16px; align-items: center; flex-wrap: wrap; }
          header h1 { font-size: 18px; margin: 0 12px 0 0; }
          input, select, button { font: inherit; padding: 4px 8px; background: #222; color: #eee; border: 1px solid #444; border-radius: 4px; }
          button { cursor: pointer; }
          main { padding: 16px 20px; }
          #clips { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(260px, 100%), 1fr)); gap: 14px; }
          .clip { background: #1b1b1b; border-radius: 6px; overflow: hidden; }
          .clip img { width: 100%; display: block; aspect-ratio: 16 / 9; object-fit: cover; background: #000; cursor: pointer; }
          .clip .info { padding: 8px 10px; font-size: 13px; color: #bbb; }
          .clip .labels { color: #fff; font-weight: 600; }
          .clip .actions { display: flex; gap: 8px; padding: 0 10px 10px; }
          .incomplete { color: #f0a030; }
          #player { display: none; margin-bottom: 16px; }
          #player video { max-width: 100%; max-height: 70vh; background: #000; }
          a { color: #7cc4ff; }
          nav a { margin-right: 12px; }
          #sources { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(420px, 100%), 1fr)); gap: 14px; }
          #sources.single { grid-template-columns: minmax(0, 960px); }
          .source { background: #1b1b1b; border-radius: 6px; overflow: hidden; }
          .view { position: relative; background: #000; line-height: 0; }
          .view img { width: 100%; display: block; }
          .box { position: absolute; border: 2px solid #39f; box-sizing: border-box; pointer-events: none; line-height: 1.2; }
          .box span { position: absolute; left: -2px; top: -20px; background: #39f; color: #fff; font-size: 12px; padding: 1px 4px; white-space: nowrap; }
          /* No room above the box (a person close to the camera): the label goes inside it. */
          .box.inside span { top: 0; left: 0; }
          .quads { position: absolute; left: 0; top: 0; pointer-events: none; }
          .quads polygon { fill: none; stroke: #f5c518; stroke-width: 2; }
          .zones { position: absolute; left: 0; top: 0; pointer-events: none; }
          .zones polygon { fill: rgba(80, 200, 120, 0.15); stroke: #50c878; stroke-width: 2; }
          .zones polyline { fill: none; stroke: #ff7f50; stroke-width: 3; }
          .zones text { fill: #fff; font-size: 13px; paint-order: stroke; stroke: #000; stroke-width: 3px; }
          .view.drawing { cursor: crosshair; outline: 2px dashed #50c878; }
          .counts { color: #9fd; }
          .rec { position: absolute; top: 8px; left: 8px; background: #c00; color: #fff; font: 600 12px/1 system-ui; padding: 4px 8px; border-radius: 3px; line-height: 1; }
          .source .info { padding: 8px 10px; font-size: 13px; color: #bbb; display: flex; gap: 12px; flex-wrap: wrap; align-items: center; }
          .source .name { color: #fff; font-weight: 600; }
          .state-failed, .state-reconnecting, .state-waiting { color: #f0a030; }
          .state-paused { color: #999; }
          progress { width: 160px; max-width: 100%; }
          .error { color: #f66; }
          .controls { display: flex; gap: 6px; flex-wrap: wrap; }
          .edit { display: flex; gap: 8px; flex-wrap: wrap; align-items: center; width: 100%; }
          .edit[hidden] { display: none; }
          .table-scroll { overflow-x: auto; max-width: 100%; }
          /* Phones (360-430 px): one column, nothing wider than the screen. */
          * { box-sizing: border-box; }
          img, video, svg { max-width: 100%; }
          @media (max-width: 600px) {
            header { padding: 10px 12px; gap: 8px; }
            main { padding: 10px 12px; }
            header form, header > label { width: 100%; display: flex; gap: 6px; flex-wrap: wrap; align-items: center; }
            header input:not([type=checkbox]) { flex: 1 1 140px; min-width: 0; width: 100%; }
            #player video { max-height: 50vh; }
            table, thead, tbody, tr, td, th { display: block; width: 100%; }
            thead { display: none; }
            tr { border-bottom: 1px solid #333; padding: 6px 0; }
            td, th { border: none !important; padding: 3px 0 !important; }
          }
        </style>
        """

    static let album = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Spotter album</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">\(style)</head>
        <body>
        <header>
          <h1>Spotter album</h1>
          <nav><a href="/live">Live</a><a href="/samples">Demo videos</a></nav>
          <label>Label <input id="label" placeholder="person" size="10"></label>
          <label>Source <input id="source" placeholder="any" size="24"></label>
          <label>From <input id="from" type="date"></label>
          <label>To <input id="to" type="date"></label>
          <button id="apply">Filter</button>
        </header>
        <main>
          <div id="player"><video id="video" controls playsinline preload="metadata"></video><div id="playing"></div></div>
          <div id="clips"></div>
          <p><button id="more" hidden>More</button></p>
          <p id="empty" hidden>No clips yet. Record some with <code>spotter record INPUT --album DIR</code>.</p>
          <p id="nomatch" hidden>No clips match these filters.</p>
          <p class="note">Times are in your browser's time zone (<span id="zone"></span>).</p>
        </main>
        <script>
        let next = null;
        const $ = (id) => document.getElementById(id);
        function query() {
          const q = new URLSearchParams();
          for (const key of ["label", "source"]) if ($(key).value) q.set(key, $(key).value);
          if ($("from").value) q.set("from", $("from").value);
          if ($("to").value) q.set("to", $("to").value + "T99");
          q.set("limit", "24");
          return "/api/v1/album?" + q.toString();
        }
        function play(clip) {
          $("player").style.display = "block";
          $("video").src = clip.url;
          $("video").play().catch(() => {});
          $("playing").textContent = clip.source + " " + clip.start.toFixed(1) + "-" + clip.end.toFixed(1) + " s";
          window.scrollTo(0, 0);
        }
        function card(clip) {
          const div = document.createElement("div");
          div.className = "clip";
          div.dataset.id = clip.id;
          const img = document.createElement("img");
          img.src = clip.thumbnail_url || "";
          img.alt = clip.labels.join(", ");
          img.onclick = () => play(clip);
          const info = document.createElement("div");
          info.className = "info";
          const labels = document.createElement("div");
          labels.className = "labels";
          labels.textContent = (clip.labels.join(", ") || "unlabelled") + (clip.best_score ? " " + Math.round(clip.best_score * 100) + "%" : "");
          const times = document.createElement("div");
          // Wall-clock time in the browser's zone: when the clip began (older clips: when it was written).
          const when = new Date(clip.started_at || clip.created_at);
          times.className = "when";
          times.dataset.time = when.toISOString();
          times.textContent = when.toLocaleString() + " · " + clip.duration.toFixed(1) + " s · " + clip.frames + " frames";
          const source = document.createElement("div");
          source.textContent = clip.source;
          info.append(labels, times, source);
          if (clip.incomplete) { const w = document.createElement("div"); w.className = "incomplete"; w.textContent = "incomplete"; info.append(w); }
          const actions = document.createElement("div");
          actions.className = "actions";
          const playButton = document.createElement("button"); playButton.textContent = "Play"; playButton.onclick = () => play(clip);
          const download = document.createElement("a"); download.href = clip.url; download.download = ""; download.textContent = "Download";
          const remove = document.createElement("button"); remove.textContent = "Delete";
          remove.onclick = async () => {
            if (!confirm("Delete this clip, its thumbnail and its index entry?")) return;
            const r = await fetch("/api/v1/album/" + clip.id, { method: "DELETE" });
            if (r.ok) div.remove();
          };
          actions.append(playButton, download, remove);
          div.append(img, info, actions);
          return div;
        }
        async function load(url, replace) {
          const r = await fetch(url);
          const body = await r.json();
          if (replace) $("clips").replaceChildren();
          for (const clip of body.clips) $("clips").append(card(clip));
          next = body.next;
          $("more").hidden = !next;
          const none = $("clips").children.length === 0;
          const filtered = ["label", "source", "from", "to"].some((key) => $(key).value);
          $("empty").hidden = !(none && !filtered);
          $("nomatch").hidden = !(none && filtered);
        }
        $("zone").textContent = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
        for (const [key, value] of new URLSearchParams(location.search)) if ($(key)) $(key).value = value;
        $("apply").onclick = () => load(query(), true);
        $("more").onclick = () => next && load(next, false);
        load(query(), true);
        </script>
        </body></html>
        """

    /// Every source (or `?source=ID` alone): the latest frame with the boxes of that very frame drawn
    /// over it (both from one stream, `GET /api/v1/live`), a recording indicator, fps, inference
    /// time, dropped frames and the decode-to-display latency.
    static let live = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Spotter live</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">\(style)</head>
        <body>
        <header>
          <h1>Spotter live</h1>
          <nav><a href="/live">All sources</a><a href="/samples">Demo videos</a><a href="/album">Album</a></nav>
          <form id="add">
            <input id="input" placeholder="rtsp://camera/stream, /dev/video0, file or sample" size="40" required>
            <label><input id="record" type="checkbox" checked> record</label>
            <label><input id="realtime" type="checkbox" checked> files in real time</label>
            <label><input id="loop" type="checkbox"> loop</label>
            <label><input id="rectangles" type="checkbox"> rectangles</label>
            <button>Add source</button> <span id="error"></span>
          </form>
        </header>
        <main>
          <div id="sources"></div>
          <p id="none" hidden>No sources. Add a camera, a stream or a video file above.</p>
        </main>
        <script>
        const $ = (id) => document.getElementById(id);
        const only = new URLSearchParams(location.search).get("source");
        const cards = {};
        // What the page shows, for people and for tests: per source, the event of the frame on screen
        // and the decode-to-display latencies (ms).
        window.spotter = { shown: {}, latencies: {} };
        if (only) $("sources").className = "single";
        function percentile(values, p) {
          if (!values.length) return 0;
          const sorted = [...values].sort((a, b) => a - b);
          return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
        }
        function card(status) {
          const c = { id: status.id, pending: null, loading: false, latencies: [] };
          c.root = document.createElement("div"); c.root.className = "source"; c.root.dataset.id = status.id;
          c.view = document.createElement("div"); c.view.className = "view";
          c.img = document.createElement("img"); c.img.alt = status.input;
          c.overlay = document.createElement("div");
          c.rec = document.createElement("div"); c.rec.className = "rec"; c.rec.textContent = "● REC"; c.rec.hidden = true;
          c.quads = document.createElementNS("http://www.w3.org/2000/svg", "svg"); c.quads.setAttribute("class", "quads");
          c.zoneLayer = document.createElementNS("http://www.w3.org/2000/svg", "svg"); c.zoneLayer.setAttribute("class", "zones");
          c.view.append(c.img, c.zoneLayer, c.overlay, c.quads, c.rec);
          // Drawing a zone (clicks add corners) or a line (two clicks), in the frame's pixels.
          c.draft = null;
          c.view.onclick = (e) => {
            if (!c.draft || !c.shownWidth) return;
            const r = c.img.getBoundingClientRect(), scale = r.width / c.shownWidth;
            c.draft.points.push([Math.round((e.clientX - r.left) / scale), Math.round((e.clientY - r.top) / scale)]);
            if (c.draft.kind === "line" && c.draft.points.length === 2) finishDraft(c);
            else drawZones(c);
          };
          const info = document.createElement("div"); info.className = "info";
          const name = document.createElement("a"); name.className = "name"; name.href = "/live?source=" + status.id; name.textContent = status.id + " " + status.input;
          c.state = document.createElement("span");
          c.stats = document.createElement("span"); c.stats.className = "stats";
          c.progress = document.createElement("progress"); c.progress.max = 100; c.progress.hidden = true;
          const controls = document.createElement("span"); controls.className = "controls";
          c.pause = document.createElement("button"); c.pause.className = "pause";
          c.pause.onclick = async () => { await change(c, { paused: !c.status.paused }); };
          const edit = document.createElement("button"); edit.textContent = "Edit"; edit.className = "edit-button";
          const remove = document.createElement("button"); remove.textContent = "Remove"; remove.className = "remove";
          remove.onclick = async () => {
            if (!confirm("Remove " + status.id + " (" + status.input + ")? Its open clip is finished and kept.")) return;
            const r = await fetch("/api/v1/sources/" + status.id, { method: "DELETE" });
            if (!r.ok) { c.error.textContent = (await r.json()).error.message; return; }
            refresh();
          };
          const zoneButton = document.createElement("button"); zoneButton.textContent = "Draw zone"; zoneButton.className = "draw-zone";
          const lineButton = document.createElement("button"); lineButton.textContent = "Draw line"; lineButton.className = "draw-line";
          c.doneButton = document.createElement("button"); c.doneButton.textContent = "Finish zone"; c.doneButton.className = "finish-zone"; c.doneButton.hidden = true;
          const clearButton = document.createElement("button"); clearButton.textContent = "Clear zones"; clearButton.className = "clear-zones";
          zoneButton.onclick = () => startDraft(c, "zone");
          lineButton.onclick = () => startDraft(c, "line");
          c.doneButton.onclick = () => finishDraft(c);
          clearButton.onclick = async () => { if (confirm("Remove every zone and line of " + status.id + "?")) await change(c, { zones: { zones: [], lines: [] } }); };
          controls.append(c.pause, edit, remove, zoneButton, lineButton, c.doneButton, clearButton);
          c.counts = document.createElement("span"); c.counts.className = "counts";
          c.clips = document.createElement("a"); c.clips.className = "clips";
          c.clips.href = "/album?source=" + encodeURIComponent(status.album_source || status.input);
          // Edit in place: classes, threshold, recording.
          c.form = document.createElement("form"); c.form.className = "edit"; c.form.hidden = true;
          c.form.innerHTML = '<label>Classes <input name="classes" placeholder="person, car (empty: all)"></label>'
            + '<label>Threshold <input name="threshold" type="number" min="0.05" max="1" step="0.05"></label>'
            + '<label><input name="record" type="checkbox"> record</label><button>Save</button>';
          edit.onclick = () => {
            c.form.hidden = !c.form.hidden;
            c.form.classes.value = (c.status.classes || []).join(", ");
            c.form.threshold.value = c.status.threshold;
            c.form.record.checked = c.status.record;
          };
          c.form.onsubmit = async (e) => {
            e.preventDefault();
            const classes = c.form.classes.value.split(",").map((x) => x.trim()).filter((x) => x);
            if (await change(c, { classes, threshold: Number(c.form.threshold.value), record: c.form.record.checked })) c.form.hidden = true;
          };
          c.error = document.createElement("span"); c.error.className = "error";
          info.append(name, c.state, c.progress, c.stats, c.clips, c.counts, controls, c.error, c.form);
          c.root.append(c.view, info);
          $("sources").append(c.root);
          return c;
        }
        async function change(c, patch) {
          c.error.textContent = "";
          const r = await fetch("/api/v1/sources/" + c.id, { method: "PATCH", headers: { "Content-Type": "application/json" },
            body: JSON.stringify(patch) });
          if (!r.ok) { c.error.textContent = (await r.json()).error.message; return false; }
          refresh();
          return true;
        }
        function startDraft(c, kind) {
          c.draft = { kind, points: [] };
          c.view.classList.add("drawing");
          c.doneButton.hidden = kind !== "zone";
          c.error.textContent = kind === "zone" ? "Click the zone's corners on the picture, then Finish zone." : "Click the line's two ends on the picture.";
        }
        async function finishDraft(c) {
          const draft = c.draft;
          c.draft = null; c.view.classList.remove("drawing"); c.doneButton.hidden = true; c.error.textContent = "";
          if (!draft || draft.points.length < (draft.kind === "zone" ? 3 : 2)) { drawZones(c); return; }
          const layout = JSON.parse(JSON.stringify(c.status.zones || { zones: [], lines: [] }));
          layout.zones = layout.zones || []; layout.lines = layout.lines || [];
          const taken = new Set([...layout.zones, ...layout.lines].map((z) => z.name));
          let name = prompt("Name of the " + draft.kind, draft.kind + (draft.kind === "zone" ? layout.zones.length + 1 : layout.lines.length + 1));
          if (!name) { drawZones(c); return; }
          while (taken.has(name)) name += "'";
          if (layout.normalized) {
            const [w, h] = [c.status.width, c.status.height];
            draft.points = draft.points.map(([x, y]) => [x / w, y / h]);
          }
          if (draft.kind === "zone") layout.zones.push({ name, polygon: draft.points });
          else layout.lines.push({ name, from: draft.points[0], to: draft.points[1] });
          await change(c, { zones: layout });
        }
        // The source's zones and lines (and a zone being drawn) over the picture.
        function drawZones(c) {
          const layer = c.zoneLayer;
          layer.replaceChildren();
          if (!c.shownWidth) return;
          layer.setAttribute("width", c.img.clientWidth); layer.setAttribute("height", c.img.clientHeight);
          const scale = c.img.clientWidth / c.shownWidth;
          const layout = c.status && c.status.zones || { zones: [], lines: [] };
          const [nx, ny] = layout.normalized ? [c.status.width, c.status.height] : [1, 1];
          const at = ([x, y]) => (x * nx * scale) + "," + (y * ny * scale);
          const svg = (tag, attributes, text) => {
            const element = document.createElementNS("http://www.w3.org/2000/svg", tag);
            for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
            if (text) element.textContent = text;
            layer.append(element);
          };
          for (const zone of layout.zones || []) {
            svg("polygon", { points: zone.polygon.map(at).join(" "), "data-zone": zone.name });
            const [x, y] = zone.polygon[0];
            svg("text", { x: x * nx * scale + 4, y: y * ny * scale + 16 }, zone.name);
          }
          for (const line of layout.lines || []) {
            svg("polyline", { points: at(line.from) + " " + at(line.to), "data-line": line.name });
            svg("text", { x: line.from[0] * nx * scale + 4, y: line.from[1] * ny * scale + 16 }, line.name);
          }
          if (c.draft && c.draft.points.length) {
            svg("polyline", { points: c.draft.points.map(([x, y]) => (x * scale) + "," + (y * scale)).join(" "), class: "draft" });
          }
        }
        // This source's counts of the last 24 hours: entries per zone, crossings per line and direction.
        async function loadCounts(c) {
          const from = new Date(Date.now() - 24 * 3600 * 1000).toISOString().slice(0, 13) + ":00:00Z";
          const r = await fetch("/api/v1/counts?source=" + encodeURIComponent(c.id) + "&from=" + from);
          if (!r.ok) return;
          c.totals = {};
          for (const row of (await r.json()).counts) {
            const key = row.kind === "line" ? row.name + " " + row.direction : row.name;
            c.totals[key] = (c.totals[key] || 0) + row.count;
          }
          showCounts(c);
        }
        function showCounts(c) {
          const parts = Object.entries(c.totals || {}).sort().map(([key, n]) => key + ": " + n);
          c.counts.textContent = parts.length ? "today " + parts.join(" · ") : "";
          c.counts.dataset.totals = JSON.stringify(c.totals || {});
        }
        function drawBoxes(c, d) {
          const scale = c.img.clientWidth / d.width;
          if (c.shownWidth !== d.width) { c.shownWidth = d.width; drawZones(c); }
          c.overlay.replaceChildren();
          // Rectangles (sources with "rectangles": true) as outlines through their four corners.
          c.quads.replaceChildren();
          c.quads.setAttribute("width", c.img.clientWidth); c.quads.setAttribute("height", c.img.clientHeight);
          for (const r of d.rectangles ?? []) {
            const quad = document.createElementNS("http://www.w3.org/2000/svg", "polygon");
            quad.setAttribute("points", r.corners.map(([x, y]) => (x * scale) + "," + (y * scale)).join(" "));
            quad.dataset.frame = d.frame;
            c.quads.append(quad);
          }
          for (const det of d.detections) {
            const { xmin: x0, ymin: y0, xmax: x1, ymax: y1 } = det.box;
            const box = document.createElement("div");
            box.className = "box";
            box.dataset.frame = d.frame;
            box.style.left = (x0 * scale) + "px"; box.style.top = (y0 * scale) + "px";
            box.style.width = ((x1 - x0) * scale) + "px"; box.style.height = ((y1 - y0) * scale) + "px";
            if (y0 * scale < 20) box.classList.add("inside");
            const tag = document.createElement("span");
            const who = det.identity ? (det.identity.name ?? "unknown") + " · " : "";
            // A tracked object: "#12 person 0.81".
            tag.textContent = det.track ? "#" + det.track + " " + who + det.label + " " + det.score.toFixed(2)
              : who + det.label + " " + Math.round(det.score * 100) + "%";
            if (det.track) box.dataset.track = det.track;
            if (det.stationary) box.classList.add("stationary");
            box.append(tag);
            c.overlay.append(box);
          }
        }
        // One frame in flight per source: the newest frame waits while a picture loads, older ones are skipped.
        function pump(c) {
          if (c.loading || !c.pending) return;
          const { d, jpeg } = c.pending; c.pending = null; c.loading = true;
          const img = new Image();
          img.alt = c.img.alt;
          const url = URL.createObjectURL(new Blob([jpeg], { type: "image/jpeg" }));
          img.onload = () => {
            const old = c.img;
            c.view.replaceChild(img, old);
            c.img = img;
            if (old.src.startsWith("blob:")) URL.revokeObjectURL(old.src);
            drawBoxes(c, d);
            window.spotter.shown[c.id] = d;
            requestAnimationFrame(() => {
              c.latencies.push(Date.now() - d.decoded_at);
              if (c.latencies.length > 300) c.latencies.shift();
              window.spotter.latencies[c.id] = c.latencies;
              c.latency = percentile(c.latencies, 0.5);
              c.loading = false;
              pump(c);
            });
          };
          img.onerror = () => { URL.revokeObjectURL(url); c.loading = false; pump(c); };
          img.src = url;
        }
        function showStats(c, s) {
          c.stats.textContent = (s.fps ?? 0).toFixed(1) + " fps · " + (s.inference_ms ?? 0).toFixed(1) + " ms inference · "
            + (s.dropped ?? 0) + " dropped" + (s.skipped ? " · " + s.skipped + " skipped (no motion)" : "")
            + (c.latency !== undefined ? " · " + Math.round(c.latency) + " ms latency" : "");
          if (s.percent !== undefined) { c.progress.hidden = false; c.progress.value = s.percent; c.progress.title = s.percent + "%"; }
        }
        async function refresh() {
          const r = await fetch("/api/v1/sources");
          const body = await r.json();
          const seen = new Set();
          for (const status of body.sources) {
            if (only && status.id !== only) continue;
            seen.add(status.id);
            const c = cards[status.id] || (cards[status.id] = card(status));
            c.status = status;
            c.pause.textContent = status.paused ? "Resume" : "Pause";
            c.state.textContent = status.state + (status.message ? ": " + status.message : "");
            c.state.className = "state-" + status.state;
            c.rec.hidden = !status.recording;
            c.clips.textContent = status.clips ? status.clips + " clip" + (status.clips > 1 ? "s" : "") : "";
            showStats(c, status);
            drawZones(c);
            if (status.zones) loadCounts(c);
          }
          for (const id of Object.keys(cards)) if (!seen.has(id)) { cards[id].root.remove(); delete cards[id]; }
          $("none").hidden = seen.size > 0;
        }
        function handle(e, jpeg) {
          const c = cards[e.source];
          if (e.type === "detection") { if (c && jpeg) { c.pending = { d: e, jpeg }; pump(c); } }
          else if (e.type === "clip_started") { if (c) c.rec.hidden = false; }
          else if (e.type === "clip_finished") { if (c) { c.rec.hidden = true; refresh(); } }
          else if (e.type === "line_cross" || e.type === "zone_enter") {
            if (c) {
              c.totals = c.totals || {};
              const key = e.type === "line_cross" ? e.line + " " + e.direction : e.zone;
              c.totals[key] = (c.totals[key] || 0) + 1;
              showCounts(c);
            }
          }
          else if (e.type === "source_stats" || e.type === "job_progress") { if (c) showStats(c, e); }
          else if (["source_state", "source_added", "source_removed", "source_changed"].includes(e.type)) refresh();
        }
        // One stream for the whole page (GET /api/v1/live): a line of JSON per event, and after each
        // detection line the JPEG of its frame (jpeg_bytes long). Reconnects with backoff.
        // The stream is closed when the page is hidden or left (the browser would otherwise keep its
        // connection for a page in its back-forward cache), and opened again when it comes back.
        let streaming = null;
        addEventListener("pagehide", () => { if (streaming) streaming.abort(); streaming = null; });
        addEventListener("pageshow", (e) => { if (e.persisted) follow(); });
        async function follow() {
          const url = "/api/v1/live" + (only ? "?sources=" + encodeURIComponent(only) : "");
          const text = new TextDecoder();
          const mine = new AbortController();
          streaming = mine;
          for (let delay = 500; streaming === mine; delay = Math.min(delay * 2, 10000)) {
            try {
              const r = await fetch(url, { cache: "no-store", signal: mine.signal });
              if (!r.ok) throw new Error("live stream: HTTP " + r.status);
              const reader = r.body.getReader();
              let buffer = new Uint8Array(0), waiting = null;
              for (;;) {
                const { value, done } = await reader.read();
                if (done) break;
                delay = 500;
                const joined = new Uint8Array(buffer.length + value.length);
                joined.set(buffer); joined.set(value, buffer.length);
                buffer = joined;
                let at = 0;
                for (;;) {
                  if (waiting) {
                    if (buffer.length - at < waiting.jpeg_bytes) break;
                    handle(waiting, buffer.slice(at, at + waiting.jpeg_bytes));
                    at += waiting.jpeg_bytes; waiting = null;
                    continue;
                  }
                  const end = buffer.indexOf(10, at);
                  if (end < 0) break;
                  const e = JSON.parse(text.decode(buffer.subarray(at, end)));
                  at = end + 1;
                  if (e.jpeg_bytes) waiting = e; else handle(e, null);
                }
                buffer = buffer.slice(at);
              }
            } catch (error) { console.warn(error); }
            await new Promise((resume) => setTimeout(resume, delay));
            refresh();
          }
        }
        follow();
        $("add").onsubmit = async (e) => {
          e.preventDefault();
          $("error").textContent = "";
          const r = await fetch("/api/v1/sources", { method: "POST", headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ input: $("input").value, record: $("record").checked, realtime: $("realtime").checked, loop: $("loop").checked,
              rectangles: $("rectangles").checked }) });
          if (!r.ok) { $("error").textContent = (await r.json()).error.message; return; }
          $("input").value = "";
          refresh();
        };
        refresh();
        setInterval(refresh, 5000);
        </script>
        </body></html>
        """

    /// The catalog's sample videos: download with a progress bar (bytes, rate, time left), then
    /// process one as a job and watch it on the live page.
    static let samples = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Spotter demo videos</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">\(style)
        <style> table { border-collapse: collapse; } td, th { padding: 8px 12px; border-bottom: 1px solid #333; text-align: left; } </style></head>
        <body>
        <header>
          <h1>Spotter demo videos</h1>
          <nav><a href="/live">Live</a><a href="/album">Album</a></nav>
        </header>
        <main>
          <div class="table-scroll"><table><thead><tr><th>Video</th><th>Size</th><th>Status</th><th></th></tr></thead><tbody id="samples"></tbody></table></div>
          <p id="none" hidden>No sample videos: this server has no catalog.</p>
          <h2>Your own video</h2>
          <form id="upload"><input id="file" type="file" accept="video/*" required> <button>Upload and process</button>
            <progress id="uploaded" max="100" hidden></progress> <span id="uploadStatus"></span></form>
        </main>
        <script>
        const $ = (id) => document.getElementById(id);
        const rows = {};
        // Progress values the bars showed, for people and for tests.
        window.spotter = { progress: {} };
        const mb = (bytes) => (bytes / 1048576).toFixed(1) + " MB";
        function row(sample) {
          const tr = document.createElement("tr");
          tr.dataset.name = sample.name;
          const name = document.createElement("td");
          name.innerHTML = "<b></b><br><small></small>";
          name.querySelector("b").textContent = sample.name;
          name.querySelector("small").textContent = sample.summary + " (" + sample.license + ")";
          const size = document.createElement("td"); size.textContent = sample.size ? mb(sample.size) : "?";
          const status = document.createElement("td"); status.className = "status";
          const bar = document.createElement("progress"); bar.max = 100; bar.hidden = true;
          const text = document.createElement("span");
          status.append(bar, text);
          const actions = document.createElement("td");
          const download = document.createElement("button"); download.textContent = "Download"; download.className = "download";
          const process = document.createElement("button"); process.textContent = "Process"; process.className = "process";
          download.onclick = async () => {
            download.disabled = true;
            const r = await fetch("/api/v1/samples/" + encodeURIComponent(sample.name) + "/pull", { method: "POST" });
            if (!r.ok) { text.textContent = (await r.json()).error.message; download.disabled = false; }
            else if ((await r.json()).state === "cached") refresh();
          };
          process.onclick = async () => {
            const r = await fetch("/api/v1/sources", { method: "POST", headers: { "Content-Type": "application/json" },
              body: JSON.stringify({ input: sample.name, record: true }) });
            const body = await r.json();
            if (!r.ok) { text.textContent = body.error.message; return; }
            location.href = "/live?source=" + body.id;
          };
          actions.append(download, process);
          tr.append(name, size, status, actions);
          $("samples").append(tr);
          return { tr, bar, text, download, process };
        }
        function show(r, sample) {
          r.download.hidden = sample.cached;
          r.process.hidden = !sample.cached;
          r.bar.hidden = !sample.downloading;
          r.download.disabled = sample.downloading;
          r.text.textContent = sample.cached ? "cached" : sample.downloading ? "downloading"
            : sample.error ? "download failed: " + sample.error : "not downloaded";
          if (sample.progress) progress(r, sample.progress);
        }
        function progress(r, p) {
          r.bar.hidden = false;
          r.download.disabled = true;
          if (p.percent !== undefined) r.bar.value = p.percent;
          (window.spotter.progress[p.name] = window.spotter.progress[p.name] || []).push(p.percent);
          r.text.textContent = mb(p.received) + (p.total ? " of " + mb(p.total) : "") + " · " + mb(p.bytes_per_second) + "/s"
            + (p.eta_s !== undefined ? " · " + Math.ceil(p.eta_s) + " s left" : "");
        }
        async function refresh() {
          const body = await (await fetch("/api/v1/samples")).json();
          for (const sample of body.samples) show(rows[sample.name] || (rows[sample.name] = row(sample)), sample);
          $("none").hidden = body.samples.length > 0;
        }
        const events = new EventSource("/api/v1/events?types=download_progress,download_finished,download_failed");
        events.addEventListener("download_progress", (e) => { const p = JSON.parse(e.data); if (rows[p.name]) progress(rows[p.name], p); });
        events.addEventListener("download_finished", () => refresh());
        events.addEventListener("download_failed", (e) => {
          const f = JSON.parse(e.data);
          refresh().then(() => { if (rows[f.name]) rows[f.name].text.textContent = "failed: " + f.message; });
        });
        // Upload with a progress bar (XMLHttpRequest reports upload progress; fetch does not), then process.
        $("upload").onsubmit = (e) => {
          e.preventDefault();
          const file = $("file").files[0];
          const xhr = new XMLHttpRequest();
          xhr.open("POST", "/api/v1/uploads?name=" + encodeURIComponent(file.name));
          $("uploaded").hidden = false;
          xhr.upload.onprogress = (p) => { if (p.lengthComputable) $("uploaded").value = 100 * p.loaded / p.total; };
          xhr.onload = async () => {
            const body = JSON.parse(xhr.responseText);
            if (xhr.status !== 201) { $("uploadStatus").textContent = body.error.message; return; }
            const r = await fetch("/api/v1/sources", { method: "POST", headers: { "Content-Type": "application/json" },
              body: JSON.stringify({ input: body.path, record: true }) });
            const source = await r.json();
            if (!r.ok) { $("uploadStatus").textContent = source.error.message; return; }
            location.href = "/live?source=" + source.id;
          };
          xhr.onerror = () => { $("uploadStatus").textContent = "the upload failed"; };
          xhr.send(file);
        };
        refresh();
        </script>
        </body></html>
        """

    /// The sign-in form; `next` is where a right token returns to, `message` says why it is shown again.
    static func login(next: String, message: String?) -> String {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Spotter: sign in</title>\(style)</head>
            <body><main>
              <h1>Spotter</h1>
              <p>This server needs its token (the <code>--token</code> it was started with).</p>
              \(message.map { "<p class=\"error\" role=\"alert\">\(escaped($0))</p>" } ?? "")
              <form method="post" action="/login"><input type="hidden" name="next" value="\(escaped(next))">
                <input name="token" type="password" autocomplete="current-password" autofocus> <button>Sign in</button></form>
            </main></body></html>
            """
    }
}
