#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CacheSystem

/// Human-readable renderings of the daemon's answers.
enum Format {
    /// A size as cachectl writes every size: `formatSize` with a tenth
    /// always ("16.0 KiB"), so that sizes line up in columns.
    static func size(_ bytes: Int64) -> String { formatSize(bytes, decimals: .always) }

    /// `s` on one line, every character that could break a line, a table
    /// or the terminal written visibly: `\n`, `\r`, `\t`, `\\` (so an
    /// escape is never ambiguous), and `\uXXXX` for the other C0 and C1
    /// controls, DEL, U+2028 and U+2029 (line and paragraph separators) and
    /// the bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069).
    static func visible(_ s: String) -> String {
        visible(s, keepingNewlines: false, keepingBackslashes: false)
    }

    /// `visible`, except that LF stays a line break: for a block of text
    /// (a post's body) whose lines are meant as lines.
    static func visibleBlock(_ s: String) -> String {
        visible(s, keepingNewlines: true, keepingBackslashes: false)
    }

    private static func visible(_ s: String, keepingNewlines: Bool, keepingBackslashes: Bool) -> String {
        let scalars = s.unicodeScalars
        func needsEscape(_ v: UInt32) -> Bool { Format.needsEscape(v) && !(keepingBackslashes && v == 0x5C) }
        guard scalars.contains(where: { needsEscape($0.value) }) else { return s }
        var out = String.UnicodeScalarView()
        let hex = Array("0123456789abcdef".unicodeScalars)
        for scalar in scalars {
            let v = scalar.value
            guard needsEscape(v) else { out.append(scalar); continue }
            switch v {
            case 0x0A where keepingNewlines: out.append(scalar)
            case 0x0A: out.append(contentsOf: "\\n".unicodeScalars)
            case 0x0D: out.append(contentsOf: "\\r".unicodeScalars)
            case 0x09: out.append(contentsOf: "\\t".unicodeScalars)
            case 0x5C: out.append(contentsOf: "\\\\".unicodeScalars)
            default:
                out.append(contentsOf: "\\u".unicodeScalars)
                for shift in [12, 8, 4, 0] { out.append(hex[Int((v >> UInt32(shift)) & 0xF)]) }
            }
        }
        return String(out)
    }

    private static func needsEscape(_ v: UInt32) -> Bool {
        v < 0x20 || v == 0x5C || (v >= 0x7F && v <= 0x9F) || v == 0x2028 || v == 0x2029
            || (v >= 0x202A && v <= 0x202E) || (v >= 0x2066 && v <= 0x2069)
    }

    /// A value for one line of text output: strings escaped with `visible`.
    static func text(_ v: JSON?) -> String {
        switch v {
        case .string(let s)?: return visible(s)
        case .number(let n)?: return n
        case .bool(let b)?: return b ? "true" : "false"
        case nil, .null?: return "-"
        // JSON text escapes its own controls; what it leaves raw (U+2028, C1, bidi) is escaped here.
        case let other?: return visible(String(decoding: other.encoded, as: UTF8.self), keepingNewlines: false, keepingBackslashes: true)
        }
    }

    /// One post; `id` is the id it is kept by (the answer's), else its own `id`.
    static func post(_ p: JSON, id: JSON? = nil) -> String {
        let (bodyKey, bodyValue) = body(p)
        let shown = bodyValue?.string.map(visibleBlock) ?? text(bodyValue)
        var lines = ["Post \(text(id ?? p["id"])) by user \(user(p))", "Title: \(title(p))", "", shown]
        if case .object(let pairs) = p {
            let extra = pairs.filter { !["id", "userId", "title", bodyKey].contains($0.0) }
            if !extra.isEmpty { lines.append("") }
            for (k, v) in extra { lines.append("\(visible(k)): \(text(v))") }
        }
        return lines.joined(separator: "\n")
    }

    /// Who wrote a post: jsonplaceholder's `userId`, else the first of a
    /// JSON Feed 1.1 item's `authors` (an RSS or Atom entry's author), JSON
    /// Feed 1.0's `author`, or an `author` string (Reddit).
    static func user(_ p: JSON) -> String {
        if let id = p["userId"], !id.isNull { return text(id) }
        for found in [p["authors"]?.array?.first?["name"], p["author"]?["name"], p["author"]] where found?.string != nil { return text(found) }
        return "-"
    }

    /// A post's body and the member it is: `body`, else a JSON Feed item's
    /// `content_text`, `content_html` (as the HTML it is) or `summary`.
    static func body(_ p: JSON) -> (key: String, value: JSON?) {
        for key in ["content_text", "content_html", "summary"] where p["body"] == nil {
            if let value = p[key], value.string != nil { return (key, value) }
        }
        return ("body", p["body"])
    }

    /// A post's title as `list_posts` searches it (docs/protocol.md): its
    /// `title` string, or WordPress's `title.rendered`; without a `title`,
    /// its `name` (Lemmy), `record.text` (Bluesky) or `text` (Slack, X).
    static func title(_ p: JSON) -> String {
        if let rendered = p["title"]?["rendered"], rendered.string != nil { return text(rendered) }
        if p["title"] == nil {
            for found in [p["name"], p["record"]?["text"], p["text"]] where found?.string != nil { return text(found) }
        }
        return text(p["title"])
    }

    /// The widths of `get posts`' ID and USER columns.
    struct PostColumns: Equatable {
        var id = 5
        var user = 4
        /// The widest a column grows to fit a page: a longer id (a URL)
        /// stands out of its column rather than push every title right.
        static let maxWidth = 40

        /// Wide enough for every id and user of `entries` (whose ids kept
        /// by are `ids`), never narrower than now.
        func fitting(_ entries: [JSON], ids: [JSON]?) -> PostColumns {
            var c = self
            for (i, p) in entries.enumerated() {
                let id = TerminalWidth.cells(text(ids.flatMap { i < $0.count ? $0[i] : nil } ?? p["id"]))
                c.id = max(c.id, min(id, Self.maxWidth))
                c.user = max(c.user, min(TerminalWidth.cells(Format.user(p)), Self.maxWidth))
            }
            return c
        }
    }

    /// The head of `get posts`' table.
    static func postsHeader(_ c: PostColumns = PostColumns()) -> String {
        pad("ID", c.id) + "  " + pad("USER", c.user) + "  TITLE\n"
    }

    /// One post's line of `get posts`' table; `id` is the id it is kept by
    /// (`list_posts`' `ids`), else its own `id`.
    static func postLine(_ p: JSON, id: JSON?, _ c: PostColumns = PostColumns()) -> String {
        pad(text(id ?? p["id"]), c.id) + "  " + pad(user(p), c.user) + "  " + title(p) + "\n"
    }

    static func image(_ i: JSON) -> String {
        let cached = i["hash"].map { !$0.isNull } ?? false
        var lines = ["Row \(text(i["row"])): \(text(i["description"]))", "url:   \(text(i["url"]).hidingURLPassword)"]
        if cached {
            lines += ["hash:  \(text(i["hash"]))", "size:  \(size(i["size"]?.integer ?? 0)) (\(text(i["size"])) bytes)",
                      "type:  \(text(i["type"]))", "path:  \(text(i["path"]))"]
        } else {
            lines.append("not cached")
        }
        if let e = i["last_error"], !e.isNull {
            let status = e["status"].flatMap { $0.isNull ? nil : " (HTTP \(text($0)))" } ?? ""
            lines.append("last error: \(text(e["reason"]))\(status), \(ago(e["time"]?.double)) ago")
        }
        if let v = i["variant"], !v.isNull {
            lines += ["variant: \(text(v["width"])) x \(text(v["height"])) \(text(v["type"])), \(size(v["size"]?.integer ?? 0))",
                      "  hash:  \(text(v["hash"]))", "  path:  \(text(v["path"]))"]
        }
        return lines.joined(separator: "\n")
    }

    /// Whole seconds from unix time `t` until now ("?" when unknown).
    static func ago(_ t: Double?) -> String {
        guard let t else { return "?" }
        return "\(max(0, Int64(Double(time(nil)) - t))) s"
    }

    /// The width of `get images`' TYPE column for `rows`: their longest
    /// type (image/vnd.microsoft.icon is 24), at least 10.
    static func typeWidth(_ rows: [JSON], atLeast width: Int = 10) -> Int {
        rows.reduce(width) { max($0, text($1["type"]).count) }
    }

    /// The head of `get images`' table, its TYPE column `typeWidth` wide.
    static func imagesHeader(typeWidth: Int) -> String {
        "  ROW  STATE          SIZE  " + left("TYPE", typeWidth) + "  URL\n"
    }

    /// Whether a row of `list_images` is cached.
    static func isCached(_ i: JSON) -> Bool { !(i["hash"]?.isNull ?? true) }

    /// One row's line of `get images`' table: its state, size, type and
    /// URL, and why its URL last failed.
    static func imageLine(_ i: JSON, typeWidth: Int) -> String {
        let cached = isCached(i)
        let error = i["last_error"].flatMap { $0.isNull ? nil : $0 }
        return pad(text(i["row"]), 5) + "  " + (cached ? "cached    " : error != nil ? "failed    " : "missing   ") +
            pad(cached ? size(i["size"]?.integer ?? 0) : "-", 9) + "  " +
            left(cached ? text(i["type"]) : "-", typeWidth) + "  " + text(i["url"]).hidingURLPassword +
            (error.map { "  (" + (cached ? "last check failed: " : "") + text($0["reason"]) + ")" } ?? "") + "\n"
    }

    static func prefetch(_ a: JSON) -> String {
        var lines: [String] = []
        if let p = a["posts"], !p.isNull {
            let kept = p["kept"]?.integer ?? 0
            lines.append("posts:  \(text(p["fetched"])) fetched, \(text(p["unchanged"])) unchanged, \(text(p["removed"])) removed, \(text(p["invalid"])) invalid"
                         + (kept > 0 ? ", \(kept) kept from before" : ""))
        }
        if let i = a["images"], !i.isNull {
            lines.append("images: \(text(i["downloaded"])) downloaded, \(text(i["cached"])) already cached, \(text(i["revalidated"])) revalidated "
                         + "(\(text(i["changed"])) changed, \(text(i["unchanged"])) unchanged), \(text(i["failed"])) failed, "
                         + "\(text(i["skipped"])) skipped; \(text(i["transfers"])) transfers, \(size(i["bytes"]?.integer ?? 0))")
        }
        for f in a["failures"]?.array ?? [] {
            lines.append("  row \(text(f["row"])) \(text(f["url"]).hidingURLPassword): \(text(f["error"]))")
        }
        return lines.joined(separator: "\n")
    }

    static func status(_ s: JSON) -> String {
        var lines = [
            "cached \(text(s["version"])), up \(text(s["uptime_s"])) s",
            "store:    \(text(s["store"]))",
            "posts:    \(text(s["posts"]))",
            "images:   \(text(s["images_cached"]))/\(text(s["images"])) rows cached, \(text(s["objects"])) objects, \(size(s["bytes"]?.integer ?? 0))" +
                ((s["max_bytes"]?.integer ?? 0) > 0 ? " of \(size(s["max_bytes"]?.integer ?? 0))" : ""),
        ]
        if case .object(let pairs)? = s["counters"] {
            lines.append("counters: " + pairs.map { "\(visible($0.0))=\(text($0.1))" }.joined(separator: " "))
        }
        lines.append("last prefetch: " + lastPrefetch(s["last_prefetch"]))
        if let mode = s["verify_reads"]?.string { lines.append("verify reads: \(visible(mode))") }
        if let scrub = s["scrub"], !scrub.isNull { lines.append("scrub: " + self.scrub(scrub)) }
        for w in s["feed_warnings"]?.array ?? [] { lines.append("incomplete feed: " + visible(w.string ?? "")) }
        return lines.joined(separator: "\n")
    }

    /// `status`'s `scrub` in a line: when the last pass ended and what it
    /// found, the pass under way, when the next starts.
    static func scrub(_ s: JSON) -> String {
        var parts: [String] = []
        if let l = s["last"], !l.isNull {
            let c = l["checked"]
            parts.append("last pass ended \(ago(l["ended"]?.double)) ago: \(text(c?["objects"])) objects (\(size(c?["bytes"]?.integer ?? 0))) checked, "
                         + "\(text(c?["corrupt"])) corrupt, \(text(c?["unreadable"])) unreadable, \(text(c?["missing"])) missing")
        } else {
            parts.append("no pass ended yet")
        }
        if let p = s["pass"], !p.isNull {
            let c = p["checked"]
            parts.append((s["state"]?.string == "off" ? "paused" : "running") + ": \(text(c?["objects"]))/\(text(p["objects"])) objects, "
                         + "\(size(c?["bytes"]?.integer ?? 0)) of \(size(p["bytes"]?.integer ?? 0))")
        }
        if s["state"]?.string == "off" {
            parts.append("off (scrub-interval 0)")
        } else if let next = s["next_start"]?.double {
            parts.append("next in \(max(0, Int64(next - Double(time(nil))))) s")
        }
        return parts.joined(separator: "; ")
    }

    /// `status`'s `last_prefetch` in a line.
    static func lastPrefetch(_ p: JSON?) -> String {
        guard let p, !p.isNull else { return "none since the daemon started" }
        let took = NumberText.fixed((p["finished"]?.double ?? 0) - (p["started"]?.double ?? 0), 1)
        var line = "finished \(ago(p["finished"]?.double)) ago after \(took) s, "
        guard p["succeeded"] == .bool(true) else { return line + "failed: \(text(p["error"]))" }
        line += "succeeded"
        if let i = p["summary"]?["images"], !i.isNull {
            line += "; images \(text(i["downloaded"])) downloaded, \(text(i["revalidated"])) revalidated (\(text(i["changed"])) changed), "
                + "\(text(i["failed"])) failed, \(text(i["skipped"])) skipped"
        }
        return line
    }

    /// `status` in the Prometheus text exposition format (shared with the
    /// daemon's `/metrics`, so both print the same).
    static func metrics(_ s: JSON) -> String { MetricsText.render(s) }

    static func verify(_ a: JSON) -> String {
        let corrupt = a["corrupt"]?.array ?? []
        var out = "checked \(text(a["checked"])) objects: \(corrupt.count) corrupt, \(text(a["repaired"])) repaired"
        for c in corrupt { out += "\n  quarantined \(text(c))" }
        return out
    }

    static func gc(_ a: JSON) -> String {
        "removed \(text(a["removed"])) unreferenced files, freed \(size(a["freed_bytes"]?.integer ?? 0))"
    }

    static func compact(_ a: JSON) -> String {
        "index log compacted from \(text(a["records_before"])) to \(text(a["records_after"])) records"
    }

    static func ping(_ a: JSON, socket: String) -> String {
        "cached \(text(a["version"])) (protocol \(text(a["protocol"]))) answers on \(socket)"
    }

    /// `s` right-aligned in `n` terminal cells (a wide character takes two).
    private static func pad(_ s: String, _ n: Int) -> String {
        let cells = TerminalWidth.cells(s)
        return cells >= n ? s : String(repeating: " ", count: n - cells) + s
    }

    private static func left(_ s: String, _ n: Int) -> String {
        s + String(repeating: " ", count: max(0, n - TerminalWidth.cells(s)))
    }
}
