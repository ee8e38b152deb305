/// The page's style sheet (inline: the page's CSP allows its own inline
/// style and nothing else). Wide screens show the posts and the images side
/// by side; below 800 px one of them at a time, chosen by the header's tabs.
extension IndexPage {
    static let style = #"""
:root { color-scheme: light dark; --line: #8884; --muted: #888; --accent: #36c; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { display: flex; flex-wrap: wrap; gap: .4em 1em; align-items: center; padding: .5em 1.2em; border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 1; background: Canvas; }
header h1 { font-size: 1.1em; margin: 0; }
#status, #summary { color: var(--muted); font-size: .85em; }
#summary { margin-left: auto; }
button { font: inherit; font-size: .9em; padding: .25em .8em; border: 1px solid var(--line); border-radius: 6px; background: ButtonFace; color: ButtonText; cursor: pointer; }
button:disabled { opacity: .5; cursor: default; }
.tabs { display: none; gap: .3em; }
.tabs button[aria-selected="true"] { border-color: var(--accent); color: var(--accent); font-weight: 600; }
main { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 2em; padding: 0 1.2em 2em; }
main[data-view="detail"] > #posts, main[data-view="detail"] > #images { display: none; }
main[data-view="detail"] { grid-template-columns: minmax(0, 1fr); }
@media (max-width: 800px) {
  main { grid-template-columns: minmax(0, 1fr); padding: 0 .8em 2em; }
  header { padding: .5em .8em; }
  .tabs { display: flex; }
  main[data-tab="posts"] > #images, main[data-tab="images"] > #posts { display: none; }
}
.bar { display: flex; flex-wrap: wrap; align-items: baseline; gap: .5em 1em; }
h2.section { font-size: 1.3em; margin: .8em 0 .4em; }
#search { flex: 1 1 12em; max-width: 24em; font: inherit; padding: .3em .6em; border: 1px solid var(--line); border-radius: 6px; }
.error { color: #c33; border: 1px solid #c335; border-radius: 6px; padding: .5em .8em; }
.hint { color: var(--muted); border: 1px dashed var(--line); border-radius: 6px; padding: .8em; }
.hint code, .detail code { font-size: .95em; }
.post { border-bottom: 1px solid var(--line); padding: .5em 0; }
.post h2 { font-size: 1em; margin: 0; }
.post h2 a, .detail a { color: inherit; text-decoration: none; }
.post h2 a:hover { text-decoration: underline; }
.meta { color: var(--muted); font-size: .8em; margin: 0 0 .2em; }
.post p.body { margin: 0; color: var(--muted); display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 3; overflow: hidden; }
.pager { display: flex; align-items: center; gap: .5em; margin: .8em 0; flex-wrap: wrap; }
.pager .range { color: var(--muted); font-size: .85em; min-width: 10em; text-align: center; }
.detail { max-width: 46em; }
.detail .back { color: var(--accent); display: inline-block; margin: .8em 0; }
.detail h2 { font-size: 1.4em; margin: .2em 0; }
.detail .body { white-space: pre-line; }
table { border-collapse: collapse; width: 100%; }
td, th { border-bottom: 1px solid var(--line); padding: .4em; text-align: left; vertical-align: middle; }
td.n { color: var(--muted); width: 3.5em; }
td.img { width: 176px; height: 80px; }
td.img img { display: block; max-width: 160px; max-height: 72px; min-height: 32px; object-fit: contain; image-rendering: pixelated; }
img[data-state="error"] { outline: 2px dashed #c33; min-width: 40px; min-height: 20px; }
.placeholder { width: 160px; min-height: 48px; padding: .3em; text-align: center; border: 1px dashed var(--line); border-radius: 6px; color: var(--muted); font-size: .8em; overflow-wrap: anywhere; }
.placeholder a { display: block; }
.placeholder[data-state="failed"] { color: #c33; border-color: #c336; }
"""#
}
