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
          #clips { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 14px; }
          .clip { background: #1b1b1b; border-radius: 6px; overflow: hidden; }
          .clip img { width: 100%; display: block; aspect-ratio: 16 / 9; object-fit: cover; background: #000; cursor: pointer; }
          .clip .info { padding: 8px 10px; font-size: 13px; color: #bbb; }
          .clip .labels { color: #fff; font-weight: 600; }
          .clip .actions { display: flex; gap: 8px; padding: 0 10px 10px; }
          .incomplete { color: #f0a030; }
          #player { display: none; margin-bottom: 16px; }
          #player video { max-width: 100%; max-height: 70vh; background: #000; }
          a { color: #7cc4ff; }
        </style>
        """

    static let album = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Spotter album</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">\(style)</head>
        <body>
        <header>
          <h1>Spotter album</h1>
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
          times.textContent = clip.created_at.replace("T", " ").replace("Z", "") + " · " + clip.duration.toFixed(1) + " s · " + clip.frames + " frames";
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
          $("empty").hidden = $("clips").children.length > 0;
        }
        $("apply").onclick = () => load(query(), true);
        $("more").onclick = () => next && load(next, false);
        load(query(), true);
        </script>
        </body></html>
        """

    static let login = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Spotter: sign in</title>\(style)</head>
        <body><main>
          <h1>Spotter</h1>
          <p>This server needs its token (the <code>--token</code> it was started with).</p>
          <form method="post" action="/login"><input name="token" type="password" autofocus> <button>Sign in</button></form>
        </main></body></html>
        """
}
