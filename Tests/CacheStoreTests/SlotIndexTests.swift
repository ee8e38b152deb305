import Testing
@testable import CacheStore
import CacheSystem

/// `SlotIndex` in a replay with a `Prefaulter`: its doubled buckets are made
/// ahead, and an ask a jump (`reserve`) passed is withdrawn, not left to the end.
@Suite struct SlotIndexTests {
    static func doubled(_ capacity: Int) -> Prefaulter.Key<UInt64> { Prefaulter.Key(purpose: 3, capacity: capacity) }

    @Test func aReserveJumpWithdrawsTheDoublingAskedFor() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        var index = SlotIndex()
        var slots: [(Int32, Int)] = []
        Prefaulter.$current.withValue(p) {
            index.reserve(SlotIndex.prefaultedBuckets * 3 / 4 - 1)
            // Past 9/16 of the buckets: the doubled ones are asked for.
            for s in 0..<Int32(SlotIndex.prefaultedBuckets * 5 / 8) {
                let h = Int(truncatingIfNeeded: UInt64(UInt32(s)) &* 0x9E37_79B9_7F4A_7C15)
                index.insert(s, hash: h)
                slots.append((s, h))
            }
            p.waitUntilMade()
            index.reserve(SlotIndex.prefaultedBuckets * 3)
        }
        #expect(p.take(Self.doubled(SlotIndex.prefaultedBuckets * 2))?.capacity == nil, "the doubled buckets, passed by the jump, still waited")
        for (s, h) in slots { #expect(index.find(hash: h) { $0 == s } == s) }
    }
}
