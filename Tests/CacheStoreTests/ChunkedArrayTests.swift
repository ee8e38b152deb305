import Testing
@testable import CacheStore

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
}
