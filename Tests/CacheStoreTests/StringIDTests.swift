import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// String post ids on disk (docs/storage-format.md, "The store's own
/// names"): whatever bytes an id holds, its file is one safe name beneath
/// `posts/`, no other id's name, holding the post's JSON.
@Suite struct StringIDTests {
    static let kib = String(repeating: "\u{1F600}", count: 256)  // 1,024 bytes
    static let ids: [PostID] = [
        .string("a/b"), .string("../../etc/passwd"), .string(".."), .string("."), .string("-rf"), .string("\u{0}nul"),
        .string("\u{1F600}"), .string(kib), .string(String(repeating: "x", count: 300)), .string("5"), .int(5),
        .string("Abc"), .string("abc"), .string("ABC"), .string(" "), .string("%41"), .string("s_x"), .string("h_0"),
    ]
    /// A post's JSON, different for each id (the store keeps bytes, it does not parse them).
    static func json(_ id: PostID) -> [UInt8] {
        Array("{\"id\":\(id.isString ? "s" : "i")\(id.description)}".utf8)
    }

    static func posts() -> [(id: PostID, json: [UInt8])] { ids.map { ($0, json($0)) } }

    @Test func eachIdHasOneSafeFileBeneathPostsHoldingItsJSON() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts(Self.posts(), pages: onePage(count: Self.ids.count))
        let names = Self.ids.map(PostFileNames.name(of:))
        #expect(Set(names).count == names.count, "names distinct: \(names)")
        #expect(Set(names.map { $0.lowercased() }).count == names.count, "even ignoring case")
        #expect(try FileSystem.list(dir.path + "/posts").sorted() == names.sorted())
        #expect(try FileSystem.list(dir.path).sorted() == ["index.log", "lock", "objects", "posts", "quarantine", "tmp"])
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty)
        for (id, name) in zip(Self.ids, names) {
            #expect(!name.contains("/") && name.utf8.count <= PostFileNames.maxEncodedName && PostFileNames.isStoreName(name), "\(name)")
            #expect(try FileSystem.read(dir.path + "/posts/" + name) == Self.json(id), "\(id)")
            #expect(store.post(id: id) == Self.json(id))
        }
        #expect(store.post(id: .string("5")) != store.post(id: .int(5)))
        store.close()

        // After a reopen and a reconciliation that finds missing, changed and stale files.
        try FileSystem.unlink(dir.path + "/posts/" + names[0])
        try dir.writeDurably(Array("tampered".utf8), to: "posts/" + names[7])
        try dir.writeDurably(Array("{}".utf8), to: "posts/s_gone.json")
        let staleHashed = "h_" + Hash128(of: Array("gone".utf8)).hex + ".json"
        try dir.writeDurably(Array("{}".utf8), to: "posts/" + staleHashed)
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        for id in Self.ids { #expect(store.post(id: id) == Self.json(id)) }
        #expect(store.reconcilePostFiles().fixed == 4)
        #expect(try FileSystem.list(dir.path + "/posts").sorted() == names.sorted())
        for (id, name) in zip(Self.ids, names) { #expect(try FileSystem.read(dir.path + "/posts/" + name) == Self.json(id)) }
        #expect(store.reconcilePostFiles().fixed == 0)
    }

    @Test func theNamesAreTheDocumentedOnes() {
        #expect(PostFileNames.name(of: .int(-5)) == "-5.json")
        #expect(PostFileNames.name(of: .string("a/b")) == "s_a%2Fb.json")
        #expect(PostFileNames.name(of: .string("..")) == "s_...json")
        #expect(PostFileNames.name(of: .string("Abc")) == "s_%41bc.json")
        #expect(PostFileNames.name(of: .string("\u{0}é")) == "s_%00%C3%A9.json")
        #expect(PostFileNames.name(of: .string("5")) == "s_5.json")
        // 193 kept bytes make a name of 200 bytes; one more is hashed.
        #expect(PostFileNames.name(of: .string(String(repeating: "a", count: 193))).utf8.count == 200)
        let long = String(repeating: "a", count: 194)
        #expect(PostFileNames.name(of: .string(long)) == "h_" + Hash128(of: Array(long.utf8)).hex + ".json")
        #expect(PostFileNames.name(of: .string(long)) == "h_aebe5a6cdd3471e8bb90f39b65efdd9e.json", "docs/storage-format.md's example")
        // 64 escaped bytes still fit (199); 65 do not.
        #expect(PostFileNames.name(of: .string(String(repeating: "/", count: 64))).hasPrefix("s_"))
        #expect(PostFileNames.name(of: .string(String(repeating: "/", count: 65))).hasPrefix("h_"))
    }

    @Test func onlyTheCanonicalFormsAreTheStores() {
        let hex32 = String(repeating: "0123456789abcdef", count: 2)
        for name in ["5.json", "-5.json", "s_a%2Fb.json", "s_...json", "h_\(hex32).json", "s_%00.json"] {
            #expect(PostFileNames.isStoreName(name), "\(name)")
        }
        let foreign = ["s_abc%2f.json", "s_A.json", "s_%61.json", "s_.json", "s_%2.json", "s_%GG.json", "s_%FF.json",
                       "h_XYZ.json", "h_\(hex32.uppercased()).json", "h_\(hex32)0.json", "s_a.JSON", "s_a.json.orig",
                       "s_" + String(repeating: "a", count: 194) + ".json", "007.json", "+5.json", "notes.txt", "t_a.json"]
        for name in foreign { #expect(!PostFileNames.isStoreName(name), "\(name)") }
    }

    /// Many ids of random characters: every name distinct (ignoring case
    /// too), safe, and read back as the store's own.
    @Test func randomIdsGetDistinctSafeNames() {
        var rng = SystemRandomNumberGenerator()
        let alphabet: [Character] = Array("aA/.%-_ 0\u{0}\u{7F}é\u{1F600}\u{FFFD}\\") + ["\u{301}"]
        var seen: [String: PostID] = [:]
        var ids = Set<PostID>()
        var lowered = Set<String>()
        for _ in 0..<5_000 {
            let s = String((0..<Int.random(in: 1...90, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
            guard let id = PostID(string: s), ids.insert(id).inserted else { continue }
            let name = PostFileNames.name(of: id)
            #expect(seen[name] == nil, "\(name) for two ids")
            seen[name] = id
            lowered.insert(name.lowercased())
            #expect(!name.contains("/") && !name.utf8.contains(0) && name.utf8.count <= 200 && PostFileNames.isStoreName(name))
        }
        #expect(lowered.count == seen.count)
    }

    /// Foreign entries in posts/ that look like the store's names but are not
    /// written that way are left alone and named once; stale names of the
    /// store's forms are removed.
    @Test func lookalikeNamesAreLeftAloneAndReportedOnce() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let reports = Locked<[String]>([])
        var configuration = StoreConfiguration(directory: dir.path)
        configuration.onIgnoredEntry = { line in reports.withLock { $0.append(line) } }
        let store = try Store(configuration)
        defer { store.close() }
        _ = try store.replacePosts([(.string("abc/"), Array("{}".utf8))], pages: onePage(count: 1))
        let foreign = ["s_abc%2f.json", "h_XYZ.json", "s_%61.json", "s_A.json", "h_" + String(repeating: "AB", count: 16) + ".json"]
        for name in foreign { try dir.writeDurably(Array("mine".utf8), to: "posts/" + name) }
        try dir.writeDurably(Array("old".utf8), to: "posts/s_old.json")
        #expect(store.reconcilePostFiles().fixed == 1)
        #expect(store.reconcilePostFiles().fixed == 0)
        #expect(try FileSystem.list(dir.path + "/posts").sorted() == (foreign + ["s_abc%2F.json"]).sorted())
        for name in foreign { #expect(try FileSystem.read(dir.path + "/posts/" + name) == Array("mine".utf8)) }
        let lines = reports.withLock { $0 }
        for name in foreign { #expect(lines.filter { $0.hasPrefix("ignored \(dir.path)/posts/\(name) (a file)") }.count == 1, "\(lines)") }
        #expect(lines.count == foreign.count)
        // A removal leaves them too.
        _ = try store.replacePosts([], pages: onePage(count: 0))
        #expect(try FileSystem.list(dir.path + "/posts").sorted() == foreign.sorted())
    }

    /// Two ids whose hashed names collide (a feed could craft that): the
    /// first in id order owns the name, the other gets no file and is named
    /// in a warning; when the owner goes, the name passes to the other.
    @Test func aHashedNameOwnedByAnotherPostGetsNoFile() {
        let a = PostID.string(String(repeating: "a", count: 70)), b = PostID.string(String(repeating: "b", count: 70))
        let naming: (PostID) -> String = { id in id.isString ? "h_same.json" : PostFileNames.name(of: id) }
        let empty = PostsPlan.Stored(posts: [:], recordedOrder: [], pages: nil, damaged: false)
        let first = PostsPlan(from: empty, to: [(b, [2]), (a, [1]), (.int(1), [9])], pages: onePage(count: 3), naming: naming)
        #expect(first.writes.map(\.name).sorted() == ["1.json", "h_same.json"])
        #expect(first.writes.first { $0.name == "h_same.json" }?.bytes == [1], "a precedes b")
        #expect(first.withoutFile.map(\.id) == [b] && first.withoutFile.first?.owner == a)
        let both = PostsPlan.Stored(posts: [a: [1], b: [2], .int(1): [9]], recordedOrder: [b, a, .int(1)], pages: .validators(Validators()), damaged: false)
        let second = PostsPlan(from: both, to: [(b, [2]), (.int(1), [9])], pages: onePage(count: 2), naming: naming)
        #expect(second.writes.map(\.name) == ["h_same.json"] && second.writes.first?.bytes == [2])
        #expect(second.previous["h_same.json"] == a, "restored to a's bytes if the refresh fails")
        #expect(second.removals.isEmpty, "b's file now, not removed")
        #expect(second.records == [.postRemoved(id: a)], "the order and the pages are derived as they stand")
    }
}
