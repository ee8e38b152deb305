import Testing
import CLinux
@testable import CacheSystem

/// The lock-order check's bookkeeping (docs/architecture.md, "Locks"): what
/// a thread holds is released however a body leaves, so the check that
/// traps on a violation sees the truth. (The trap itself ends the process;
/// the suite runs on debug builds, where every acquisition is checked.)
@Suite struct LockOrderTests {
    struct Failure: Error {}

    /// The rank on top of this thread's held locks (0: none).
    static func heldTop() -> Int32 {
        let top = clinux_lock_rank_push(LockRank.leaf.rawValue)
        clinux_lock_rank_pop(LockRank.leaf.rawValue)
        return top
    }

    @Test func nestingInOrderIsTrackedAndReleased() {
        #if DEBUG
        let writer = Locked(0, rank: .storeWriter), state = Locked(0, rank: .storeState)
        #expect(Self.heldTop() == 0)
        writer.withLock { _ in
            #expect(Self.heldTop() == LockRank.storeWriter.rawValue)
            state.withLock { _ in #expect(Self.heldTop() == LockRank.storeState.rawValue) }
            #expect(Self.heldTop() == LockRank.storeWriter.rawValue, "the inner lock is released")
        }
        #expect(Self.heldTop() == 0)
        #endif
    }

    @Test func aThrowingBodyReleasesItsRank() {
        #if DEBUG
        let writer = Locked(0, rank: .storeWriter)
        #expect(throws: Failure.self) { try writer.withLock { (_) throws(Failure) in throw Failure() } }
        #expect(Self.heldTop() == 0, "a thrown body leaves nothing held")
        #endif
    }

    @Test func aMonitorReleasesItsRankAfterWaitAndUpdate() {
        #if DEBUG
        let m = Monitor(1, rank: .storeState)
        #expect(m.wait { $0 > 0 ? $0 : nil } == 1)
        m.update { $0 += 1 }
        #expect(m.wait(for: .seconds(0.01)) { $0 > 5 ? $0 : nil } == nil, "a timed-out wait")
        #expect(Self.heldTop() == 0)
        #endif
    }

    @Test func ranksAreOrderedAsDocumented() {
        let order: [LockRank] = [.bodySink, .postFiles, .storeWriter, .prefetchTally, .storeState, .leaf]
        #expect(order == order.sorted())
    }
}
