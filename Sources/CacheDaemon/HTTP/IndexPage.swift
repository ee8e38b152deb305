/// The page the HTTP front-end serves at `/` (text/html; charset=utf-8): the
/// old iOS app's two screens, Posts and Images, in one self-contained
/// document (docs/http.md, "The page"). Inline CSS and JS only (the files
/// under `Page/`, embedded at build time as `IndexPage.style`, `.script`
/// and `.body` by scripts/embed-page.py), nothing from another origin, so
/// it works while the feeds' origin is down; it talks only to the daemon, by
/// relative URL: `GET /posts?with_ids=1` a page at a time (`q=` for the
/// search box), `GET /posts/{id}` for one post, `GET /images` a page at a
/// time, `/objects/{hash}` (lazily, only rows near the viewport), the
/// server-sent events of `/events` (progress, row, done) and, when
/// `http-allow-admin` is on, `POST /prefetch`. `<body data-admin>` says
/// which: the server writes it, so the page needs no request to know.
///
/// Every string from the feeds goes in through `textContent` or attribute
/// setters, never as markup (a WordPress `rendered` value is parsed by an
/// inert `DOMParser` and only its text is used), and a hash is used in a
/// URL only when it is 32 lower-case hex digits.
///
/// What the browser tests read (Tests/Fixtures/browser/page_check.py):
/// - `article.post[data-id]`, each with an `h2` title (a link to
///   `#post/<id>`), a `.meta` line (id and user) and a `p.body`;
/// - `tr[data-row]` in the images table, with `data-filled-by` `listing` or
///   `event` once it shows an image; each `img` has `data-state` `loading`,
///   `loaded` or `error`; a row without one holds a `.placeholder` whose
///   `data-state` is `placeholder` (not cached yet), `failed` (its
///   `last_error`) or `unsupported` (a type browsers do not show);
/// - `#summary`'s `data-posts` and `data-rows` (on this page),
///   `data-posts-total`, `data-rows-total`, `data-posts-offset`,
///   `data-rows-offset`, `data-query`, `data-loaded`, `data-placeholders`,
///   `data-failed`, `data-unsupported`, `data-events` (row events applied),
///   `data-sse` (`connecting`, `open` or `closed`), `data-view` (`list` or
///   `detail`) and `data-tab` (`posts` or `images`), kept current;
/// - `#detail` (the post view), `#posts-empty` and `#images-empty` (the
///   empty store's hints), `button#prefetch` (shown with admin), the tabs
///   `button[data-tab]`, `#search`, and the pagers' `button[data-go]`.
enum IndexPage {
    /// The page as served: with the prefetch button when `admin`.
    static func html(admin: Bool) -> [UInt8] { admin ? withAdmin : withoutAdmin }

    private static let withAdmin = document(admin: true)
    private static let withoutAdmin = document(admin: false)

    /// Posts on one page of the list, and image rows on one page of the table.
    static let postsPerPage = 100
    static let rowsPerPage = 50

    private static func document(admin: Bool) -> [UInt8] {
        Array((head + "<body data-admin=\"\(admin ? 1 : 0)\">\n" + body + "<script>\n\"use strict\";\n"
               + "const PAGE_POSTS = \(postsPerPage), PAGE_ROWS = \(rowsPerPage);\n"
               + script + "</script>\n</body>\n</html>\n").utf8)
    }

    private static let head = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>cached</title>
        <link rel="icon" href="data:,">
        <style>
        \(style)</style>
        </head>

        """
}
