import CacheProtocol

extension PageFacts {
    /// What the shape's paging reads from a JSON page whose root is `root`
    /// and which holds `itemCount` items, the last (after `posts-item`)
    /// `lastItem`; `nextPointer` is
    /// where a next URL is (`posts-next`, a JSON Feed's `next_url`).
    /// `resolve` finds what a pointer names in the page (the root's items
    /// array may be held as ranges, not values: `FeedDecoder.document`).
    static func read(_ root: JSON, itemCount: Int, lastItem: JSON?, shape: FeedShape, nextPointer: JSONPointer?,
                     resolve: (JSONPointer) -> JSON?) throws(FeedError) -> PageFacts {
        var facts = PageFacts()
        facts.items = itemCount
        var followed: Set<String> = []
        if let nextPointer {
            followed.insert(nextPointer.description)
            if let value = resolve(nextPointer) {
                facts.documentNext = try FeedDecoder.nextURL(value, pointer: nextPointer, setting: shape.setting("next"))
            }
            // `posts-next` pointed at a cursor (Reddit's `/data/after` =
            // "t3_x") would be fetched as a relative URL and answer 404.
            if let next = facts.documentNext, shape.next != nil, !next.utf8.contains(where: { "/.?:=&".utf8.contains($0) }) {
                throw FeedError("\(shape.setting("next")) \(nextPointer) is \(MoreHint.quoted(.string(next))), a cursor rather than a URL: "
                                + "set \(shape.setting("paging")) = cursor, \(shape.setting("cursor")) = \(nextPointer) and \(shape.setting("next")) to nothing")
            }
        }
        switch shape.paging {
        case .link: break
        case .cursor(let c):
            switch c.source {
            case .pointer(let p): facts.cursor = resolve(p); followed.insert(p.description)
            case .lastItem(let p): facts.cursor = lastItem.flatMap { p.resolve(in: $0) }
            case .header: break
            }
            if let p = c.hasMore { facts.hasMore = resolve(p); followed.insert(p.description) }
        case .offset(let o):
            if case .pointer(let p)? = o.total { facts.total = resolve(p) }
        case .page(let p):
            if case .pointer(let t)? = p.totalPages { facts.total = resolve(t) }
        }
        facts.hint = MoreHint.find(in: root, prefix: shape.prefix, followed: followed)
        return facts
    }
}
