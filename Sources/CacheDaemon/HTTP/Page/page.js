const $ = (id) => document.getElementById(id);
const HASH = /^[0-9a-f]{32}$/;
// What Chromium, Firefox and Safari all draw; a row of another type says so.
const SHOWN = new Set(["image/jpeg", "image/png", "image/gif", "image/webp", "image/bmp", "image/avif",
  "image/svg+xml", "image/vnd.microsoft.icon", "image/x-win-bitmap"]);
const st = { events: 0, eventSeq: 0, sse: "connecting", postsOk: false, postsSeq: 0, imagesSeq: 0,
  postsOffset: 0, postsTotal: 0, rowsOffset: 0, rowsTotal: 0, query: "", view: "list", tab: "posts", detailSeq: 0 };
let rowByN = new Map();  // row number -> its <tr>, for the rows of the shown page

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
const str = (v) => (typeof v === "string" ? v : (typeof v === "number" ? String(v) :
  (v instanceof BigId ? v.text : "")));
// An integer id past a double's (Twitter's, Discord's): JSON.parse would round
// 9007199254740993 to ...992 and the link would name another post. Kept as its
// text where the browser gives the reviver the source (Chromium 114, Firefox 135).
class BigId { constructor(text) { this.text = text; } }
const keepBigIds = (key, v, ctx) =>
  (key === "id" && typeof v === "number" && !Number.isSafeInteger(v) && ctx && typeof ctx.source === "string" ? new BigId(ctx.source) : v);
const count = (n) => n.toLocaleString("en");

function summary() {
  const s = $("summary"), rows = $("rows");
  const q = (sel) => rows.querySelectorAll(sel).length;
  const d = {
    posts: document.querySelectorAll("#post-list article.post").length, "posts-total": st.postsTotal,
    "posts-offset": st.postsOffset, query: st.query, rows: rows.rows.length, "rows-total": st.rowsTotal,
    "rows-offset": st.rowsOffset, loaded: q('img[data-state="loaded"]'), placeholders: q('[data-state="placeholder"]'),
    failed: q('[data-state="failed"]'), unsupported: q('[data-state="unsupported"]'), events: st.events,
    sse: st.sse, view: st.view, tab: st.tab,
  };
  for (const k in d) s.setAttribute("data-" + k, String(d[k]));
  s.textContent = `${count(st.postsTotal)} ${st.query ? "matching " : ""}posts · ${count(st.rowsTotal)} images · ${st.sse}`;
}

function showError(which, message) {
  const e = $(which + "-error");
  e.hidden = message === null;
  e.textContent = message === null ? "" : message;
}

// The body and the total (X-Total-Count) of a GET; an Error with the daemon's message.
async function getJSON(path) {
  let r, body = null;
  try { r = await fetch(path, { cache: "no-store" }); }
  catch (e) { throw new Error("the daemon does not answer"); }
  try { body = JSON.parse(await r.text(), keepBigIds); } catch (e) { /* not JSON */ }
  if (!r.ok) {
    const m = body && body.error && typeof body.error.message === "string" ? body.error.message : "";
    throw new Error(m || `${path}: HTTP ${r.status}`);
  }
  const total = Number(r.headers.get("X-Total-Count"));
  return { body, total: Number.isInteger(total) ? total : null };
}

// WordPress gives {"rendered": "<p>...</p>"} where others give a string: its
// text, from an inert document (nothing in it runs or loads), a line after
// each block.
function rendered(v) {
  if (!(v && typeof v === "object" && typeof v.rendered === "string")) return v;
  const body = new DOMParser().parseFromString(v.rendered, "text/html").body;
  for (const b of body.querySelectorAll("p, br, div, li, h1, h2, h3, h4, h5, h6, blockquote, pre, tr")) b.after("\n");
  return body.textContent.replace(/\n{3,}/g, "\n\n").trim();
}
// Without a title: Lemmy's name, Bluesky's record.text, Slack's and X's text (as list_posts' query reads them).
const postTitle = (p) => str(rendered(p.title ?? p.name ?? p.record?.text ?? p.text));
// An RSS or Atom entry (stored as a JSON Feed item) has its HTML in content_html: read as text like WordPress's.
const postBody = (p) => str(rendered(p.body ?? p.content_text ?? p.summary ??
  (typeof p.content_html === "string" ? { rendered: p.content_html } : p.content)));
// Who wrote it, in the feeds the daemon reads (jsonplaceholder, JSON Feed, Mastodon, GitHub, WordPress).
function postUser(p) {
  const a = p.author, name = (o) => (o && typeof o === "object" ? str(o.name ?? o.login ?? o.acct) : "");
  return str(p.userId ?? p.user_id) || name(p.authors && p.authors[0]) || name(a) || name(p.account)
    || name(p.user) || str(a);
}

function postMeta(id, p) {
  const user = postUser(p);
  return "#" + str(id) + (user ? " · user " + user : "");
}

// A string id spelled as an integer ("5") is asked for as a string: /posts/5
// finds the integer id 5 first, and a feed may hold both.
const spellsInteger = (id) => typeof id === "string" && /^(0|-?[1-9][0-9]{0,18})$/.test(id);

function postItem(id, p) {
  const a = el("article", "post"), h = el("h2"), link = el("a", "", postTitle(p) || "(untitled)");
  a.setAttribute("data-id", str(id));
  link.href = "#post/" + encodeURIComponent(str(id)) + (spellsInteger(id) ? "?string" : "");
  h.append(link);
  a.append(h, el("p", "meta", postMeta(id, p)), el("p", "body", postBody(p)));
  return a;
}

// The pager under a list: "1–100 of 50,000", its buttons off at the ends.
function pager(which, offset, size, total) {
  const nav = $(which + "-pager");
  nav.hidden = total <= size;
  nav.querySelector(".range").textContent = total === 0 ? "none" :
    `${count(offset + 1)}–${count(Math.min(offset + size, total))} of ${count(total)}`;
  for (const b of nav.querySelectorAll("button")) {
    const back = b.dataset.go === "first" || b.dataset.go === "prev";
    b.disabled = back ? offset === 0 : offset + size >= total;
  }
}

// The offset a pager button leads to.
function pagerTarget(go, offset, size, total) {
  const last = Math.max(0, Math.floor((total - 1) / size) * size);
  return { first: 0, prev: Math.max(0, offset - size), next: Math.min(last, offset + size), last }[go] ?? offset;
}

async function loadPosts() {
  const seq = ++st.postsSeq, q = st.query;
  let path = `/posts?with_ids=1&offset=${st.postsOffset}&limit=${PAGE_POSTS}`;
  if (q) path += "&q=" + encodeURIComponent(q);
  try {
    const { body, total } = await getJSON(path);
    if (seq !== st.postsSeq) return;
    if (!Array.isArray(body)) throw new Error("/posts: not a list");
    st.postsTotal = total ?? body.length;
    if (body.length === 0 && st.postsOffset > 0 && st.postsTotal > 0) {  // the list shrank under this page
      st.postsOffset = pagerTarget("last", 0, PAGE_POSTS, st.postsTotal);
      return loadPosts();
    }
    const box = document.createDocumentFragment();
    for (const item of body) {
      if (item && typeof item === "object" && item.post && typeof item.post === "object") box.append(postItem(item.id, item.post));
    }
    $("post-list").replaceChildren(box);
    emptyHint("posts", st.postsTotal === 0, q);
    pager("posts", st.postsOffset, PAGE_POSTS, st.postsTotal);
    st.postsOk = true;
    showError("posts", null);
  } catch (e) {
    if (seq !== st.postsSeq) return;
    st.postsOk = false;
    showError("posts", e.message);
  }
  summary();
}

// The hint of an empty list: what to run, or that a search found nothing.
function emptyHint(which, empty, q) {
  const hint = $(which + "-empty");
  hint.hidden = !empty;
  if (!empty) return;
  if (q) { hint.textContent = `no post title holds “${q}”`; return; }
  const admin = document.body.dataset.admin === "1";
  hint.replaceChildren(`no ${which} yet: run `, el("code", "", "cachectl prefetch"), admin ? " or press Prefetch" : "");
}

function rowElement(n) {
  let tr = rowByN.get(n);
  if (!tr) {
    tr = el("tr");
    rowByN.set(n, tr);
    tr.setAttribute("data-row", String(n));
    tr.append(el("td", "n", String(n)), el("td", "desc"), el("td", "img"));
    tr.eventAt = 0;
  }
  return tr;
}

function placeholder(state, text, title) {
  const ph = el("div", "placeholder", text);
  ph.setAttribute("data-state", state);
  if (title) ph.title = title;
  return ph;
}

// Why a row has no image: its last download's failure, or not yet tried.
function missing(err) {
  if (!err || typeof err !== "object" || typeof err.reason !== "string") return placeholder("placeholder", "not cached yet");
  const when = Number.isFinite(err.time) ? new Date(err.time * 1000).toLocaleString() : "";
  const status = Number.isInteger(err.status) ? `HTTP ${err.status}` : "";
  return placeholder("failed", "failed: " + err.reason, [status, when].filter(Boolean).join(", "));
}

// The thumbnails the table asks for: its cell's box at 1x and 2x, made
// once for the whole host by the daemon (`/images/{row}?w=&h=`, a variant).
// `v` (which the daemon ignores) is the original's hash: a row whose image
// changes gets a new URL, not the browser's copy of the old thumbnail.
const THUMB = { w: 160, h: 72 };
const thumb = (n, scale, hash) => `/images/${n}?w=${THUMB.w * scale}&h=${THUMB.h * scale}&v=${hash}`;

// Shows `r.hash` in row `tr`: its thumbnail linking to the original, or why there is none.
function setImage(tr, r, by) {
  const cell = tr.cells[2], hash = r.hash, n = r.row;
  if (!(typeof hash === "string" && HASH.test(hash))) {
    tr.removeAttribute("data-hash");
    tr.removeAttribute("data-filled-by");
    // A row without a URL (a post without an image) never gets one.
    cell.replaceChildren(r.url === "" && !r.last_error ? placeholder("none", "no image") : missing(r.last_error));
    return;
  }
  tr.setAttribute("data-filled-by", by);
  if (tr.getAttribute("data-hash") === hash && cell.querySelector("img")) return;
  tr.setAttribute("data-hash", hash);
  const type = str(r.type);
  const a = el("a");
  a.href = "/objects/" + hash;
  a.target = "_blank";
  a.title = "the original" + (type ? ", " + type : "");
  const img = el("img");
  img.setAttribute("data-state", "loading");
  img.setAttribute("data-kind", "thumbnail");
  img.loading = "lazy";
  img.decoding = "async";
  img.alt = tr.cells[1].textContent;
  img.onload = () => { img.setAttribute("data-state", img.naturalWidth > 0 ? "loaded" : "error"); summary(); };
  // No thumbnail (no helper, a size variant-sizes refuses, an image refused):
  // the original where browsers draw its type, else a note saying why not.
  img.onerror = () => {
    if (type && !SHOWN.has(type)) {
      const size = typeof r.size === "number" ? ", " + count(r.size) + " bytes" : "";
      const ph = placeholder("unsupported", `${type}: browsers do not show this type${size}`);
      const d = el("a", "", "download");
      d.href = "/objects/" + hash;
      ph.append(d);
      cell.replaceChildren(ph);
    } else if (img.getAttribute("data-kind") === "thumbnail") {
      img.setAttribute("data-kind", "original");
      img.removeAttribute("srcset");
      img.src = "/objects/" + hash;
      return;
    } else {
      img.setAttribute("data-state", "error");
    }
    summary();
  };
  img.srcset = `${thumb(n, 1, hash)} 1x, ${thumb(n, 2, hash)} 2x`;
  img.src = thumb(n, 1, hash);
  a.append(img);
  cell.replaceChildren(a);
}

// One row of a listing into its <tr>, unless a row event since is newer.
function showRow(r, since) {
  const tr = rowElement(r.row), desc = str(r.description);
  tr.cells[1].textContent = desc;
  const img = tr.cells[2].querySelector("img");
  if (img) img.alt = desc;
  if (tr.eventAt > since) return tr;
  const same = typeof r.hash === "string" && tr.getAttribute("data-hash") === r.hash;
  if (!(same && tr.getAttribute("data-filled-by") === "event")) setImage(tr, r, "listing");
  tr.cells[2].title = [str(r.type), typeof r.size === "number" ? count(r.size) + " bytes" : ""].filter(Boolean).join(", ");
  return tr;
}

async function loadImages() {
  const seq = ++st.imagesSeq, since = st.eventSeq, offset = st.rowsOffset;
  try {
    const { body, total } = await getJSON(`/images?offset=${offset}&limit=${PAGE_ROWS}`);
    if (seq !== st.imagesSeq) return;
    if (!Array.isArray(body)) throw new Error("/images: not a list");
    st.rowsTotal = total ?? body.length;
    const old = rowByN, box = document.createDocumentFragment();
    rowByN = new Map();
    for (const r of body) {
      if (!r || typeof r !== "object" || !Number.isInteger(r.row) || rowByN.has(r.row)) continue;
      if (old.has(r.row)) rowByN.set(r.row, old.get(r.row));
      box.append(showRow(r, since));
    }
    $("rows").replaceChildren(box);
    emptyHint("images", st.rowsTotal === 0, "");
    pager("images", offset, PAGE_ROWS, st.rowsTotal);
    showError("images", null);
  } catch (e) {
    if (seq !== st.imagesSeq) return;
    showError("images", e.message);
  }
  summary();
}

// The location's hash: "#post/<encoded id>" is the post view, "#images" the
// images tab (on a narrow screen), anything else the posts.
function route() {
  const h = location.hash;
  if (h.startsWith("#post/")) {
    // An id's own "?" is encoded: a "?string" after it is the kind.
    const [encoded, kind] = h.slice(6).split("?");
    let id = null;
    try { id = decodeURIComponent(encoded); } catch (e) { /* not an encoding */ }
    showDetail(id, kind === "string");
    return;
  }
  st.view = "list";
  $("main").dataset.view = "list";
  $("detail").hidden = true;
  selectTab(h === "#images" ? "images" : "posts");
}

function selectTab(tab) {
  if (st.tab !== tab) window.scrollTo(0, 0);
  st.tab = tab;
  $("main").dataset.tab = tab;
  for (const b of document.querySelectorAll("button[data-tab]")) b.setAttribute("aria-selected", String(b.dataset.tab === tab));
  summary();
}

async function showDetail(id, asString) {
  const seq = ++st.detailSeq;
  st.view = "detail";
  $("main").dataset.view = "detail";
  $("detail").hidden = false;
  const box = $("detail-post");
  box.replaceChildren(el("p", "meta", "loading…"));
  showError("detail", null);
  summary();
  window.scrollTo(0, 0);
  if (!id) { box.replaceChildren(); showError("detail", "not a post id"); return; }
  try {
    const { body } = await getJSON("/posts/" + encodeURIComponent(id) + (asString ? "?kind=string" : ""));
    if (seq !== st.detailSeq || st.view !== "detail") return;  // another post, or the list, since
    if (!body || typeof body !== "object") throw new Error("/posts/{id}: not an object");
    const h = el("h2", "", postTitle(body) || "(untitled)");
    box.replaceChildren(h, el("p", "meta", postMeta(id, body)), el("div", "body", postBody(body)));
    box.setAttribute("data-id", id);
  } catch (e) {
    if (seq !== st.detailSeq) return;
    box.replaceChildren();
    showError("detail", e.message);
  }
  summary();
}

// Each pager's buttons page through their list.
function wirePagers() {
  $("posts-pager").addEventListener("click", (ev) => {
    const go = ev.target.closest("button[data-go]");
    if (!go) return;
    st.postsOffset = pagerTarget(go.dataset.go, st.postsOffset, PAGE_POSTS, st.postsTotal);
    loadPosts().then(() => $("posts").scrollIntoView());
  });
  $("images-pager").addEventListener("click", (ev) => {
    const go = ev.target.closest("button[data-go]");
    if (!go) return;
    st.rowsOffset = pagerTarget(go.dataset.go, st.rowsOffset, PAGE_ROWS, st.rowsTotal);
    loadImages().then(() => $("images").scrollIntoView());
  });
}

// The search box asks the daemon (/posts?q=) once typing pauses for 250 ms.
function wireSearch() {
  let timer = 0;
  $("search").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const q = $("search").value.trim();
      if (new TextEncoder().encode(q).length > 256) { showError("posts", "a search is at most 256 bytes"); return; }
      if (q === st.query) return;
      st.query = q;
      st.postsOffset = 0;
      loadPosts();
    }, 250);
  });
}

// POST /prefetch (same origin, no body: what the daemon's admin routes take).
function wirePrefetch() {
  const b = $("prefetch");
  if (document.body.dataset.admin !== "1") return;
  b.hidden = false;
  b.addEventListener("click", async () => {
    b.disabled = true;
    $("status").textContent = "prefetching…";
    try {
      const r = await fetch("/prefetch", { method: "POST", cache: "no-store" });
      let a = null;
      try { a = await r.json(); } catch (e) { /* not JSON */ }
      if (!r.ok || !a || a.ok !== true) throw new Error((a && a.error && a.error.message) || `HTTP ${r.status}`);
      const p = a.posts || {}, i = a.images || {};
      $("status").textContent = `prefetched: ${str(p.fetched) || 0} posts fetched, ${str(i.downloaded) || 0} images downloaded`
        + (i.failed ? `, ${i.failed} failed` : "");
    } catch (e) {
      $("status").textContent = "prefetch failed: " + e.message;
    }
    b.disabled = false;
    loadPosts();
    loadImages();
  });
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
    st.events++;
    const tr = rowByN.get(d.row);  // a row of another page shows it when that page is read
    if (tr) { tr.eventAt = ++st.eventSeq; setImage(tr, d, "event"); }
    summary();
  });
  es.addEventListener("done", () => {
    $("status").textContent = "prefetch finished";
    loadPosts();
    loadImages();
  });
}

for (const b of document.querySelectorAll("button[data-tab]")) {
  b.addEventListener("click", () => { location.hash = "#" + b.dataset.tab; });
}
window.addEventListener("hashchange", route);
wirePagers();
wireSearch();
wirePrefetch();
route();
loadPosts();
loadImages();
connect();
