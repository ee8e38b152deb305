import Testing
@testable import CacheStore
import CacheSystem

/// The posts' compact table (`PostTable`: the arena, the slot index, the
/// titles) against a dictionary doing the same, through many changes.
@Suite struct PostTableTests {
    typealias Generator = SplitMix

    @Test func setsReplacementsAndRemovalsMatchADictionary() {
        var g = Generator(state: 7)
        var table = PostTable()
        var model: [PostID: [UInt8]] = [:]
        for step in 0..<60_000 {
            let n = Int.random(in: 0..<5_000, using: &g)
            let id: PostID = n % 3 == 0 ? .string("post-\(n)") : .int(Int64(n))
            if Int.random(in: 0..<4, using: &g) == 0 {
                table.remove(id)
                model[id] = nil
            } else {
                let json = Array(#"{"id":\#(n),"title":"T\#(step)","v":"\#(String(repeating: "x", count: step % 300))"}"#.utf8)
                table.set(id, json)
                model[id] = json
            }
            if step % 997 == 0 { table.compactIfWasteful() }
        }
        #expect(table.count == model.count)
        #expect(Set(table.keys) == Set(model.keys))
        for (id, json) in model { #expect(table[id] == json && table.holds(id, json), "\(id)") }
        for n in 5_000..<5_100 { #expect(table[.int(Int64(n))] == nil && table.slot(of: .int(Int64(n))) == nil) }
        #expect(table.liveBytes == model.values.reduce(0) { $0 + $1.count })
    }

    /// Replacing every post again and again leaves the arena at its live
    /// bytes plus less than their size again, not at every version's.
    @Test func replacedBytesAreGivenBackByCompaction() {
        var table = PostTable()
        let body = String(repeating: "y", count: 1_000)
        for round in 0..<8 {
            for n in 0..<20_000 { table.set(.int(Int64(n)), Array(#"{"id":\#(n),"round":\#(round),"b":"\#(body)"}"#.utf8)) }
            table.compactIfWasteful()
        }
        #expect(table.count == 20_000)
        #expect(table.deadBytes <= table.liveBytes, "\(table.deadBytes) dead bytes")
        #expect(table[.int(19_999)]?.starts(with: Array(#"{"id":19999,"round":7"#.utf8)) == true)
        let titles = (0..<20_000).filter { table.title(at: table.slot(of: .int(Int64($0)))!, holds: []) }
        #expect(titles.count == 20_000)
    }

    /// A copy is a value: changing one leaves the other as it was.
    @Test func aCopyKeepsItsPosts() {
        var a: PostTable = [.int(1): Array(#"{"title":"One"}"#.utf8), .int(2): Array(#"{"title":"Two"}"#.utf8)]
        let b = a
        a.set(.int(1), Array(#"{"title":"Changed"}"#.utf8))
        a.remove(.int(2))
        #expect(b[.int(1)] == Array(#"{"title":"One"}"#.utf8) && b[.int(2)] != nil && b.count == 2)
        #expect(b.title(at: b.slot(of: .int(1))!, holds: Array("one".utf8)))
        #expect(a.title(at: a.slot(of: .int(1))!, holds: Array("changed".utf8)) && a.count == 1)
    }

    /// A post larger than a chunk has a chunk of its own.
    @Test func aPostLargerThanAChunkIsKeptWhole() {
        var table = PostTable()
        let big = Array(#"{"title":"big","b":""#.utf8) + [UInt8](repeating: 0x61, count: PostArena.chunkSize + 10) + Array(#""}"#.utf8)
        table.set(.int(1), Array(#"{"id":1}"#.utf8))
        table.set(.int(2), big)
        table.set(.int(3), Array(#"{"id":3}"#.utf8))
        #expect(table[.int(2)] == big && table[.int(1)] == Array(#"{"id":1}"#.utf8) && table[.int(3)] == Array(#"{"id":3}"#.utf8))
    }

    /// A page lent from the table keeps its bytes through later changes and
    /// a compaction, and holds only the chunks its posts lie in.
    @Test func aLentPageKeepsItsBytesAndOnlyItsChunks() {
        var table = PostTable()
        let big = (1...3).map { n in Array(#"{"id":\#(n),"pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "a") + UInt8(n), count: 9 << 20) + Array(#""}"#.utf8) }
        for (n, json) in big.enumerated() { table.set(.int(Int64(n + 1)), json) }
        let page = table.bodies(at: [table.slot(of: .int(3))!, table.slot(of: .int(3))!])
        #expect(page.count == 2 && page[0] == big[2] && page[1] == big[2])
        #expect(page.lentChunks == 1, "one chunk lent, not the arena's \(3)")
        table.remove(.int(3))
        table.set(.int(1), Array(#"{"id":1}"#.utf8))
        table.compactIfWasteful()
        #expect(page[0] == big[2] && page.totalBytes == 2 * big[2].count)
    }

    /// Titles left to `locateTitles` (a replay's) are those located one by
    /// one: in place, folded (escaped, not ASCII) and absent, through
    /// replacements and removals, on several threads.
    @Test func titlesLocatedAfterwardsAreThoseLocatedOneByOne() {
        var g = Generator(state: 35)
        var direct = PostTable()
        var deferred = PostTable()
        deferred.deferTitles()
        var needles: Set<[UInt8]> = [Array("".utf8), Array("zz".utf8)]
        for step in 0..<60_000 {
            let n = Int.random(in: 0..<30_000, using: &g)
            let id: PostID = n % 5 == 0 ? .string("p\(n)") : .int(Int64(n))
            if Int.random(in: 0..<6, using: &g) == 0 {
                direct.remove(id)
                deferred.remove(id)
                continue
            }
            let title: String
            switch step % 4 {
            case 0: title = #","title":"Plain \#(step % 50)""#
            case 1: title = #","title":"caf\u00e9 \#(step % 50)""#
            case 2: title = #","title":"Ünïcode \#(step % 50)""#
            default: title = ""
            }
            let json = Array(#"{"id":\#(n)\#(title),"v":\#(step)}"#.utf8)
            direct.set(id, json)
            deferred.set(id, json)
        }
        for word in ["plain 1", "café", "ünïcode 4", "plain", "4"] { needles.insert(Array(word.utf8)) }
        #expect(deferred.titlesDeferred)
        // Enough slots for three lanes (one per 4,096 slots at most).
        #expect(deferred.count > 3 * 4_096)
        deferred.locateTitles(threads: 3)
        #expect(!deferred.titlesDeferred)
        #expect(direct.count == deferred.count && direct.count > 1_000)
        var matched = 0
        for id in direct.keys {
            let a = direct.slot(of: id)!, b = deferred.slot(of: id)!
            for needle in needles {
                let held = direct.title(at: a, holds: needle)
                #expect(held == deferred.title(at: b, holds: needle), "\(id) \(String(decoding: needle, as: UTF8.self))")
                if held && !needle.isEmpty { matched += 1 }
            }
        }
        #expect(matched > 1_000, "the needles find titles of each kind")
    }
}
