import Testing
@testable import CacheStore
import CacheSystem

/// `ObjectTable` against the two dictionaries it replaces, driven by the
/// same random operations: every answer the same after every step.
@Suite struct ObjectTableTests {
    @Test func randomOperationsAgreeWithTwoDictionaries() {
        var random = SplitMix(state: 34)
        // Few distinct hashes, so that every operation meets known ones;
        // some share their low or high half (the halves are placed together).
        let hashes = (0..<600).map { i in Hash128(high: UInt64(i % 40), low: UInt64(i / 40) &* 0x1234_5678_9ABC_DEF1) }
        var table = ObjectTable()
        var objects: [Hash128: ObjectRef] = [:]
        var uses: [Hash128: Int64] = [:]
        for step in 0..<60_000 {
            let hash = hashes[Int(random.next() % UInt64(hashes.count))]
            switch random.next() % 6 {
            case 0, 1:
                let ref = ObjectRef(hash: hash, size: Int64(random.next() % 1000), type: .jpeg)
                #expect(table.updateValue(ref) == objects.updateValue(ref, forKey: hash), "step \(step)")
            case 2:
                #expect(table.removeValue(forKey: hash) == objects.removeValue(forKey: hash), "step \(step)")
                uses[hash] = nil
            case 3:
                // Some before the epoch: a first use counts from 0, as it did.
                let time = Int64(random.next() % 10_000) - 100
                table.noteUse(hash, at: time)
                if objects[hash] != nil { uses[hash] = max(uses[hash] ?? 0, time) }
            case 4:
                let time = Int64(random.next() % 10_000)
                table.setLastUse(hash, time)
                if objects[hash] != nil { uses[hash] = time }
            default:
                #expect(table[hash] == objects[hash] && table.lastUse(hash) == uses[hash], "step \(step)")
            }
        }
        #expect(table.count == objects.count)
        #expect(Set(table.keys) == Set(objects.keys))
        #expect(Set(table.values) == Set(objects.values))
        #expect(table.lastUses == uses)
        for hash in hashes { #expect(table[hash] == objects[hash]) }
    }

    @Test func aTableGrownPastAMillionFindsEveryObjectAndForgetsTheRemoved() {
        var table = ObjectTable()
        let n = 1 << 20
        for i in 0..<n { table.updateValue(ObjectRef(hash: Hash128(high: UInt64(i), low: ~UInt64(i)), size: Int64(i), type: .png)) }
        for i in stride(from: 0, to: n, by: 2) { table.removeValue(forKey: Hash128(high: UInt64(i), low: ~UInt64(i))) }
        #expect(table.count == n / 2)
        var found = 0
        for i in 0..<n {
            let ref = table[Hash128(high: UInt64(i), low: ~UInt64(i))]
            #expect((ref == nil) == (i % 2 == 0))
            if ref?.size == Int64(i) { found += 1 }
        }
        #expect(found == n / 2)
    }

    @Test func equalityIgnoresOrderButNotUseTimes() {
        let a = ObjectRef(hash: Hash128(high: 1, low: 2), size: 3, type: .gif)
        let b = ObjectRef(hash: Hash128(high: 4, low: 5), size: 6, type: .webp)
        var x = ObjectTable(), y = ObjectTable()
        x.updateValue(a); x.updateValue(b)
        y.updateValue(b); y.updateValue(a)
        #expect(x == y)
        x.noteUse(a.hash, at: 9)
        #expect(x != y)
        y.noteUse(a.hash, at: 9)
        #expect(x == y)
    }
}
