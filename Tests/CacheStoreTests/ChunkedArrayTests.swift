import Testing
@testable import CacheStore
import CacheSystem
import TestSupport

/// `ChunkedArray` against a plain array doing the same things.
@Suite struct ChunkedArrayTests {
    @Test func agreesWithAnArrayThroughAppendsCutsAndWritesAcrossChunks() {
        var chunked = ChunkedArray<Int>()
        var plain: [Int] = []
        var seed: UInt64 = 7
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(seed >> 33) % n
        }
        let size = ChunkedArray<Int>.chunkSize
        for step in 0..<2_000 {
            switch next(10) {
            case 0..<6:
                for _ in 0..<next(size + 3) { let v = next(1 << 30); chunked.append(v); plain.append(v) }
            case 6, 7:
                let k = next(plain.count + 1)
                chunked.removeLast(k); plain.removeLast(k)
            default:
                if !plain.isEmpty { let i = next(plain.count); chunked[i] = step; plain[i] = step }
            }
            #expect(chunked.count == plain.count)
            if !chunked.elementsEqual(plain) { Issue.record("differs after step \(step)"); return }
        }
        chunked.removeAll()
        #expect(chunked.isEmpty && chunked == [])
    }

    @Test func aCopyChangedLaterIsItsOwn() {
        var a = ChunkedArray<Int>()
        for i in 0..<(3 * ChunkedArray<Int>.chunkSize + 5) { a.append(i) }
        var b = a
        b[5] = -1
        b.append(99)
        b.removeLast(ChunkedArray<Int>.chunkSize + 7)
        #expect(a[5] == 5 && a.count == 3 * ChunkedArray<Int>.chunkSize + 5 && a.last == a.count - 1)
        #expect(b[5] == -1 && a != b)
        let c: ChunkedArray = [1, 2, 3]
        #expect(Array(c) == [1, 2, 3] && c == [1, 2, 3] && c != [1, 2])
    }

    /// A chunk made ahead in a replay has every page resident; what its
    /// elements do not fill is given back after the replay, and the array
    /// grows on over it as before.
    @Test func theLastChunkMadeAheadGivesBackItsRoom() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        var chunked = ChunkedArray<UInt64>()
        let size = ChunkedArray<UInt64>.chunkSize
        Prefaulter.$current.withValue(p) {
            chunked.append(0)
            p.waitUntilMade()
            for v in 1..<UInt64(size + 10) { chunked.append(v) }
        }
        #expect(p.taken(purpose: 2) >= 1, "the second chunk was made ahead")
        let before = try #require(chunked.withLastChunkCapacity { ResidentPages.count($0) } ?? nil)
        #expect(before.pages >= 4 && before.resident == before.pages, "made ahead: \(before.resident) of \(before.pages) pages resident")
        chunked.discardUnusedPages()
        let after = try #require(chunked.withLastChunkCapacity { ResidentPages.count($0) } ?? nil)
        #expect(after.resident <= 1, "\(after.resident) of \(after.pages) pages still resident past 10 elements")
        for v in UInt64(size + 10)..<UInt64(2 * size + 5) { chunked.append(v) }
        #expect(chunked.elementsEqual(0..<UInt64(2 * size + 5)))
    }
}
