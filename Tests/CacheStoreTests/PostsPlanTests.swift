import Testing
@testable import CacheStore
import CacheSystem

/// `PostsPlan` against the plan it replaced, which found the given posts
/// through a `[PostID: [UInt8]]` and compared the whole derived order:
/// the same records, files, removals and counts for random refreshes with
/// repeated ids, changed and removed posts, recorded orders and hashed
/// names that collide.
@Suite struct PostsPlanTests {
    /// The previous plan's decisions, as it made them.
    struct Reference {
        var records: [LogRecord] = []
        var change = PostsChange()
        var writes: [(name: String, bytes: [UInt8])] = []
        var previous: [String: PostID] = [:]
        var removals: [String] = []
        var withoutFile: [(id: PostID, name: String, owner: PostID)] = []

        init(from stored: PostsPlan.Stored, to posts: [(id: PostID, json: [UInt8])], pages: [FeedPage], naming: @escaping (PostID) -> String) {
            var new: [PostID: [UInt8]] = [:]
            var order: [PostID] = []
            for (id, json) in posts where new.updateValue(json, forKey: id) == nil { order.append(id) }
            var changed: [PostID] = []
            for id in order {
                if stored.posts.holds(id, new[id]!) { change.unchanged += 1; continue }
                changed.append(id)
                records.append(.post(id: id, json: new[id]!))
                change.fetched += 1
            }
            let removed = stored.posts.keys.filter { new[$0] == nil }.sorted(by: PostOrder.precedes)
            records += removed.map { .postRemoved(id: $0) }
            change.removed = removed.count
            if StoreState.feedOrder(recorded: stored.recordedOrder, count: new.count, ids: new.keys, isPost: { new[$0] != nil }) != order {
                records += PostOrderRecords.records(for: order)
            }
            if stored.damaged || stored.pages != StoredPages(pages) { records += StoreState.pageRecords(.posts, pages) }
            let oldOwners = PostFileNames.owners(stored.posts.keys, naming: naming)
            let newOwners = PostFileNames.owners(new.keys, naming: naming)
            var written = Set<String>()
            func write(_ name: String, _ bytes: [UInt8], before: PostID?) {
                writes.append((name, bytes))
                if let held = before, stored.posts.slot(of: held) != nil { previous[name] = held }
            }
            for id in changed {
                let name = naming(id)
                if let owner = newOwners[name], owner != id { withoutFile.append((id, name, owner)); continue }
                let hashed = PostFileNames.isHashed(name)
                write(name, new[id]!, before: hashed ? oldOwners[name] : id)
                if hashed { written.insert(name) }
            }
            for (name, owner) in newOwners where oldOwners[name] != owner && !written.contains(name) {
                write(name, new[owner]!, before: oldOwners[name])
            }
            for id in removed where newOwners[naming(id)] == nil { removals.append(naming(id)) }
        }
    }

    static func randomID(_ g: inout SplitMix) -> PostID {
        let n = Int(g.next() % 40)
        switch g.next() % 3 {
        case 0: return .int(Int64(n))
        case 1: return .string("s\(n)")
        default: return .string(String(repeating: "L", count: 65 + n % 5) + "\(n % 8)")  // a hashed name
        }
    }

    @Test func decidesAsTheDictionaryPlanDid() {
        var g = SplitMix(state: 34)
        // Long ids share a few names: collisions of hashed names, as a crafted feed could make.
        let naming: (PostID) -> String = { id in
            if case .string(let s) = id, s.utf8.count > 64 { return "h_\(s.utf8.count % 3).json" }
            return PostFileNames.name(of: id)
        }
        for round in 0..<400 {
            var stored = PostTable()
            var recorded: [PostID] = []
            for _ in 0..<Int(g.next() % 30) {
                let id = Self.randomID(&g)
                stored.set(id, [UInt8(g.next() % 3)])
                recorded.append(id)
            }
            if g.next() % 2 == 0 { recorded = [] } else if g.next() % 2 == 0 { recorded.shuffle(using: &g) }
            var posts: [(id: PostID, json: [UInt8])] = []
            for _ in 0..<Int(g.next() % 40) { posts.append((Self.randomID(&g), [UInt8(g.next() % 3)])) }
            if g.next() % 3 == 0 { posts.sort { PostOrder.precedes($0.id, $1.id) } }
            let pages = onePage(count: posts.count)
            let from = PostsPlan.Stored(posts: stored, recordedOrder: recorded, pages: g.next() % 2 == 0 ? nil : StoredPages(pages),
                                        damaged: g.next() % 5 == 0)
            let plan = PostsPlan(from: from, to: posts, pages: pages, naming: naming)
            let reference = Reference(from: from, to: posts, pages: pages, naming: naming)
            #expect(plan.records == reference.records, "round \(round)")
            #expect(plan.change == reference.change, "round \(round)")
            // The files of names whose owner changed come in a dictionary's order: compared by name.
            func files(_ w: [(name: String, bytes: [UInt8])]) -> [String] { w.map { "\($0.name) \($0.bytes)" }.sorted() }
            #expect(files(plan.writes) == files(reference.writes), "round \(round)")
            #expect(plan.previous == reference.previous && plan.removals == reference.removals, "round \(round)")
            #expect(plan.withoutFile.map { "\($0.id) \($0.name) \($0.owner)" } == reference.withoutFile.map { "\($0.id) \($0.name) \($0.owner)" }, "round \(round)")
        }
    }
}
