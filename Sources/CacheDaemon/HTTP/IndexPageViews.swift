/// The page's script, second part: the post view (`#post/<id>`, the post
/// from `/posts/{id}` with its body whole), the tabs of a narrow screen
/// (`#posts`, `#images`), the search box, the pagers' buttons, the prefetch
/// button (only with `<body data-admin="1">`), the event stream, and the
/// start.
extension IndexPage {
    static let views = #"""
// The location's hash: "#post/<encoded id>" is the post view, "#images" the
// images tab (on a narrow screen), anything else the posts.
function route() {
  const h = location.hash;
  if (h.startsWith("#post/")) {
    let id = null;
    try { id = decodeURIComponent(h.slice(6)); } catch (e) { /* not an encoding */ }
    showDetail(id);
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

async function showDetail(id) {
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
    const { body } = await getJSON("/posts/" + encodeURIComponent(id));
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
"""#
}
