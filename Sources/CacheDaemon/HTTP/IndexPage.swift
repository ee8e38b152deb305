/// The page the HTTP front-end serves at `/` (text/html; charset=utf-8): the
/// old iOS app's two screens, Posts and Images, in one self-contained
/// document. Inline CSS and JS only, nothing from another origin, so it works
/// while the feeds' origin is down; it talks only to the daemon, by relative
/// URL: `GET /posts`, `GET /images`, `/objects/{hash}` and the server-sent
/// events of `/events` (progress, row, done).
///
/// Every string from the feeds goes in through `textContent` or attribute
/// setters, never as markup, and a hash is used in a URL only when it is 32
/// lower-case hex digits.
///
/// What the browser tests read (Tests/Fixtures/browser/page_check.py):
/// - `article.post[data-id]`, each with an `h2` title and a `p` body;
/// - `tr[data-row]` in the images table, with `data-filled-by` `listing` or
///   `event` once it shows an image; each `img` has `data-state` `loading`,
///   `loaded` or `error`, each `.placeholder` has `data-state="placeholder"`;
/// - `#summary`'s `data-posts`, `data-rows`, `data-loaded`,
///   `data-placeholders`, `data-events` (row events applied) and `data-sse`
///   (`connecting`, `open` or `closed`), kept current.
enum IndexPage {
    static let html: [UInt8] = Array(#"""
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cached</title>
<link rel="icon" href="data:,">
<style>
:root { color-scheme: light dark; --line: #8884; --muted: #888; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { display: flex; gap: 1em; align-items: baseline; padding: .6em 1.2em; border-bottom: 1px solid var(--line); position: sticky; top: 0; background: Canvas; }
header h1 { font-size: 1.1em; margin: 0; }
#status, #summary { color: var(--muted); font-size: .85em; }
#summary { margin-left: auto; }
main { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 2em; padding: 0 1.2em 2em; }
@media (max-width: 800px) { main { grid-template-columns: minmax(0, 1fr); } }
h2.section { font-size: 1.3em; margin: .8em 0 .4em; }
.error { color: #c33; border: 1px solid #c335; border-radius: 6px; padding: .5em .8em; }
.post { border-bottom: 1px solid var(--line); padding: .5em 0; }
.post h2 { font-size: 1em; margin: 0 0 .2em; }
.post p { margin: 0; white-space: pre-line; color: var(--muted); }
table { border-collapse: collapse; width: 100%; }
td, th { border-bottom: 1px solid var(--line); padding: .4em; text-align: left; vertical-align: middle; }
td.n { color: var(--muted); width: 3em; }
td.img { width: 176px; }
td.img img { display: block; max-width: 160px; max-height: 160px; }
img[data-state="error"] { outline: 2px dashed #c33; min-width: 40px; min-height: 20px; }
.placeholder { width: 160px; height: 48px; display: flex; align-items: center; justify-content: center; border: 1px dashed var(--line); border-radius: 6px; color: var(--muted); font-size: .8em; }
</style>
</head>
<body>
<header><h1>cached</h1><span id="status"></span>
<div id="summary" data-posts="0" data-rows="0" data-loaded="0" data-placeholders="0" data-events="0" data-sse="connecting"></div></header>
<main>
<section id="posts"><h2 class="section">Posts</h2><p class="error" id="posts-error" hidden></p><div id="post-list"></div></section>
<section id="images"><h2 class="section">Images</h2><p class="error" id="images-error" hidden></p>
<table><thead><tr><th>#</th><th>Description</th><th>Image</th></tr></thead><tbody id="rows"></tbody></table></section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const HASH = /^[0-9a-f]{32}$/;
const st = { events: 0, eventSeq: 0, postsOk: false, postsSeq: 0, imagesSeq: 0, sse: "connecting" };
const rowByN = new Map();  // row number -> its <tr>

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
const str = (v) => (typeof v === "string" ? v : (typeof v === "number" ? String(v) : ""));

function summary() {
  const s = $("summary"), rows = $("rows");
  const d = {
    posts: document.querySelectorAll("#post-list article.post").length,
    rows: rows.rows.length,
    loaded: rows.querySelectorAll('img[data-state="loaded"]').length,
    placeholders: rows.querySelectorAll(".placeholder").length,
    events: st.events,
    sse: st.sse,
  };
  for (const k in d) s.setAttribute("data-" + k, String(d[k]));
  s.textContent = `${d.posts} posts · ${d.loaded}/${d.rows} images · ${d.sse}`;
}

function showError(which, message) {
  const e = $(which + "-error");
  e.hidden = message === null;
  e.textContent = message === null ? "" : message;
}

async function getJSON(path) {
  let r, body = null;
  try { r = await fetch(path, { cache: "no-store" }); }
  catch (e) { throw new Error("the daemon does not answer"); }
  try { body = await r.json(); } catch (e) { /* not JSON */ }
  if (!r.ok) {
    const m = body && body.error && typeof body.error.message === "string" ? body.error.message : "";
    throw new Error(m || `${path}: HTTP ${r.status}`);
  }
  return body;
}

// WordPress gives {"rendered": "..."} where others give a string; shown as text.
function rendered(v) {
  return v && typeof v === "object" && typeof v.rendered === "string" ? v.rendered : v;
}

async function loadPosts() {
  const seq = ++st.postsSeq;
  try {
    const posts = await getJSON("/posts");
    if (seq !== st.postsSeq) return;
    if (!Array.isArray(posts)) throw new Error("/posts: not a list");
    // In the daemon's order: ascending ids, or the feed's when ids are strings.
    const list = posts.filter((p) => p && typeof p === "object");
    const box = document.createDocumentFragment();
    for (const p of list) {
      const a = el("article", "post");
      a.setAttribute("data-id", str(p.id));
      a.append(el("h2", "", str(rendered(p.title))),
               el("p", "", str(rendered(p.body ?? p.content_text ?? p.summary ?? p.content))));
      box.append(a);
    }
    $("post-list").replaceChildren(box);
    st.postsOk = true;
    showError("posts", null);
  } catch (e) {
    if (seq !== st.postsSeq) return;
    st.postsOk = false;
    showError("posts", e.message);
  }
  summary();
}

function rowElement(n) {
  let tr = rowByN.get(n);
  if (!tr) {
    tr = el("tr");
    rowByN.set(n, tr);
    tr.setAttribute("data-row", String(n));
    tr.append(el("td", "n", String(n)), el("td", "desc"), el("td", "img"));
    tr.eventAt = 0;
    $("rows").append(tr);
  }
  return tr;
}

// Shows `hash` (or the placeholder when it is not a valid hash) in row `tr`.
function setImage(tr, hash, by) {
  const cell = tr.cells[2];
  const valid = typeof hash === "string" && HASH.test(hash);
  if (!valid) {
    tr.removeAttribute("data-hash");
    tr.removeAttribute("data-filled-by");
    const ph = el("div", "placeholder", "not cached yet");
    ph.setAttribute("data-state", "placeholder");
    cell.replaceChildren(ph);
    return;
  }
  tr.setAttribute("data-filled-by", by);
  if (tr.getAttribute("data-hash") === hash && cell.querySelector("img")) return;
  tr.setAttribute("data-hash", hash);
  const img = el("img");
  img.setAttribute("data-state", "loading");
  img.alt = tr.cells[1].textContent;
  img.onload = () => { img.setAttribute("data-state", img.naturalWidth > 0 ? "loaded" : "error"); summary(); };
  img.onerror = () => { img.setAttribute("data-state", "error"); summary(); };
  img.src = "/objects/" + hash;
  cell.replaceChildren(img);
}

async function loadImages() {
  const seq = ++st.imagesSeq, since = st.eventSeq;
  try {
    const rows = await getJSON("/images");
    if (seq !== st.imagesSeq) return;
    if (!Array.isArray(rows)) throw new Error("/images: not a list");
    const seen = new Set();
    for (const r of rows) {
      if (!r || typeof r !== "object" || !Number.isInteger(r.row) || seen.has(r.row)) continue;
      seen.add(r.row);
      const tr = rowElement(r.row);
      const desc = str(r.description);
      tr.cells[1].textContent = desc;
      const img = tr.cells[2].querySelector("img");
      if (img) img.alt = desc;
      if (tr.eventAt > since) { $("rows").append(tr); continue; }  // a row event is newer than this listing
      const same = typeof r.hash === "string" && tr.getAttribute("data-hash") === r.hash;
      if (!(same && tr.getAttribute("data-filled-by") === "event")) setImage(tr, r.hash, "listing");
      if (typeof r.type === "string" || typeof r.size === "number") {
        tr.cells[2].title = [str(r.type), typeof r.size === "number" ? r.size + " bytes" : ""].filter(Boolean).join(", ");
      }
      $("rows").append(tr);  // keeps the listing's order
    }
    for (const [n, tr] of rowByN) {  // gone from the listing, unless an event since made it
      if (!seen.has(n) && tr.eventAt <= since) { tr.remove(); rowByN.delete(n); }
    }
    showError("images", null);
  } catch (e) {
    if (seq !== st.imagesSeq) return;
    showError("images", e.message);
  }
  summary();
}

function parse(ev) {
  try { const d = JSON.parse(ev.data); return d && typeof d === "object" ? d : null; } catch (e) { return null; }
}

function connect() {
  const es = new EventSource("/events");
  const setSSE = (s) => { st.sse = s; summary(); };
  setSSE("connecting");
  es.onopen = () => { setSSE("open"); loadImages(); if (!st.postsOk) loadPosts(); };
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) { setSSE("closed"); setTimeout(connect, 5000); }
    else setSSE("connecting");  // EventSource reconnects by itself
  };
  es.addEventListener("progress", (ev) => {
    const d = parse(ev);
    if (!d) return;
    let s = `${str(d.phase)} ${str(d.done)}/${str(d.total)}`;
    if (typeof d.bytes === "number") s += ` · ${(d.bytes / 1048576).toFixed(1)} MB`;
    $("status").textContent = s;
  });
  es.addEventListener("row", (ev) => {
    const d = parse(ev);
    if (!d || !Number.isInteger(d.row) || typeof d.hash !== "string" || !HASH.test(d.hash)) return;
    const tr = rowElement(d.row);
    tr.eventAt = ++st.eventSeq;
    setImage(tr, d.hash, "event");
    st.events++;
    summary();
  });
  es.addEventListener("done", () => {
    $("status").textContent = "prefetch finished";
    loadPosts();
    loadImages();
  });
}

loadPosts();
loadImages();
connect();
</script>
</body>
</html>
"""#.utf8)
}
