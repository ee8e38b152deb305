import CacheProtocol

/// A sign in a page that the feed has more pages than the settings follow
/// (docs/protocol.md, "Never a silent first page"): a member such as
/// `next_cursor` or `has_more: true` at the top level or one level down.
public struct MoreHint: Sendable, Equatable {
    /// Where it is, as a JSON Pointer (`/data/after`), or `header NAME`.
    public var pointer: String
    /// Its value, as JSON text (cut to `maxValueBytes`).
    public var value: String
    /// The setting that would follow it.
    public var advice: String

    /// A value is quoted up to this many bytes.
    static let maxValueBytes = 200

    /// The members that name a next page, in the order they are looked for.
    static let names = ["next", "next_url", "next_cursor", "nextPageToken", "next_token", "cursor", "after",
                        "more_topics_url", "next_page", "has_more"]

    /// The warning's text: `posts page 1 has more: /data/after = "t3_x"; set posts-paging = cursor, ...`.
    func warning(feed prefix: String, page: Int) -> String {
        // A member's name is the page's to choose: cut like its value.
        "\(prefix) page \(page) has more: \(pointer.cut(toBytes: Self.maxValueBytes)) = \(value); \(advice.cut(toBytes: 2 * Self.maxValueBytes + 200))"
    }

    /// The first sign of more in `root`, skipping the pointers in `followed`
    /// (what the settings already read); nil when there is none. A member
    /// holding a next page (a non-empty string, a number, a link object)
    /// is preferred to `has_more: true`, which says less.
    static func find(in root: JSON, prefix: String, followed: Set<String>) -> MoreHint? {
        guard case .object(let top) = root else { return nil }
        var places: [(pointer: String, value: JSON, name: String)] = []
        for (key, value) in top {
            places.append(("/" + JSONPointer.escaped(key), value, key))
        }
        for (key, value) in top {
            guard case .object(let inner) = value else { continue }
            for (k, v) in inner { places.append(("/" + JSONPointer.escaped(key) + "/" + JSONPointer.escaped(k), v, k)) }
        }
        let candidates = places.filter { names.contains($0.name) && !followed.contains($0.pointer) }
        for c in candidates where c.name != "has_more" {
            if let hint = hint(c.pointer, c.value, name: c.name, prefix: prefix) { return hint }
        }
        if let c = candidates.first(where: { $0.name == "has_more" && $0.value.bool == true }) {
            return MoreHint(pointer: c.pointer, value: "true",
                            advice: "set \(prefix)-paging = cursor with \(prefix)-has-more = \(c.pointer) and \(prefix)-cursor or \(prefix)-cursor-last")
        }
        return nil
    }

    /// The response headers that count pages or name the next one, as
    /// APIs spell them: WordPress, GitLab.
    static let pageCountHeaders = ["X-WP-TotalPages", "X-Total-Pages"]
    static let nextPageHeaders = ["X-Next-Page"]

    /// A sign of more in the last page's headers (a link walk that ended at
    /// page number `page` of a feed whose headers count more pages, or name
    /// a next page); nil when there is none. Read only where the page itself
    /// gave no sign: a feed whose `Link` header a proxy dropped still says so.
    static func find(inHeaders headers: [String: String], page: Int, prefix: String) -> MoreHint? {
        for name in pageCountHeaders {
            guard let text = headers[name.lowercased()], let count = Int(text.trimmed()), count > page else { continue }
            return MoreHint(pointer: "header \(name)", value: String(count),
                            advice: "set \(prefix)-paging = page, \(prefix)-total-pages = header:\(name)")
        }
        for name in nextPageHeaders {
            guard let text = headers[name.lowercased()]?.trimmed(), !text.isEmpty else { continue }
            return MoreHint(pointer: "header \(name)", value: quoted(.string(text)),
                            advice: "set \(prefix)-paging = cursor, \(prefix)-cursor = header:\(name), \(prefix)-cursor-param = page")
        }
        return nil
    }

    /// The query parameter APIs take a cursor of this member's name in,
    /// where it is known (`after`: Reddit; `nextPageToken`: Google's
    /// `pageToken`); `cursor`, the default, needs no setting.
    private static func parameterAdvice(_ member: String, prefix: String) -> String {
        switch member {
        case "cursor", "next_cursor": return ""
        case "after": return ", \(prefix)-cursor-param = after"
        case "nextPageToken": return ", \(prefix)-cursor-param = pageToken"
        default: return ", \(prefix)-cursor-param = the query parameter the API takes it in"
        }
    }

    private static func hint(_ pointer: String, _ value: JSON, name: String, prefix: String) -> MoreHint? {
        let text: String
        switch value {
        case .string(let s) where !s.isEmpty: text = s
        case .number(let n): text = n
        case .object:
            guard let href = value["href"]?.string, !href.isEmpty else { return nil }
            return MoreHint(pointer: pointer, value: quoted(value), advice: "set \(prefix)-next = \(pointer)")
        default: return nil
        }
        // `next_url` and Discourse's `more_topics_url` name URLs; a `next`
        // does when it reads as one (`page2.json`, `/p?page=2`, `https://...`);
        // the other names hold cursors.
        let looksLikeURL = name.hasSuffix("_url") || (name == "next" && text.contains { $0 == "/" || $0 == "." || $0 == "?" })
            || text.hasPrefix("http://") || text.hasPrefix("https://")
        let advice = looksLikeURL ? "set \(prefix)-next = \(pointer)"
            : "set \(prefix)-paging = cursor, \(prefix)-cursor = \(pointer)" + parameterAdvice(name, prefix: prefix)
        return MoreHint(pointer: pointer, value: quoted(value), advice: advice)
    }

    static func quoted(_ value: JSON) -> String {
        String(decoding: value.encoded, as: UTF8.self).cut(toBytes: maxValueBytes)
    }
}
