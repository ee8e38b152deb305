#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import CacheSystem
import TestSupport

/// `Prefaulter`: an array asked for is made on its thread with its pages
/// resident, handed over once and not shared; a take finds only what was
/// made for its key; `stop` asks for nothing more.
@Suite struct PrefaulterTests {
    @Test func anEmptyArrayIsMadeWithItsPagesResidentAndHandedOverOnce() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        let capacity = 4 << 20
        let key = Prefaulter.Key<UInt8>(purpose: 1, capacity: capacity)
        p.prepare(key)
        p.waitUntilMade()
        var array = try #require(p.take(key))
        #expect(p.take(key) == nil, "handed over once")
        #expect(p.taken() == 1 && p.taken(purpose: 1) == 1 && p.taken(purpose: 2) == 0)
        #expect(array.isEmpty && array.capacity >= capacity)
        let base = array.withUnsafeBufferPointer { $0.baseAddress }
        let (resident, pages) = try #require(array.withUnsafeBufferPointer { ResidentPages.count(UnsafeRawBufferPointer(start: $0.baseAddress, count: capacity)) })
        #expect(resident == pages && pages > 1000, "\(resident) of \(pages) pages resident")
        // Not shared: filling it to its capacity writes in place.
        array.append(contentsOf: repeatElement(7, count: capacity))
        #expect(array.withUnsafeBufferPointer { $0.baseAddress } == base, "the array was copied: it was still shared")
    }

    @Test func aFilledArrayHoldsItsValueInEveryPlace() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        // More than one piece of the making, so that its pieces join up.
        let count = 3 * Prefaulter.piece / 8 + 1234
        let key = Prefaulter.Key<UInt64>(purpose: 3, capacity: count)
        p.prepare(key, filledWith: UInt64.max)
        p.waitUntilMade()
        let array = try #require(p.take(key))
        #expect(array.count == count && array.allSatisfy { $0 == .max })
    }

    @Test func aTakeFindsOnlyWhatWasMadeForItsKey() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        let key = Prefaulter.Key<UInt8>(purpose: 1, capacity: 8192)
        #expect(p.take(key) == nil, "nothing asked for")
        p.prepare(key)
        p.waitUntilMade()
        #expect(p.take(Prefaulter.Key<UInt8>(purpose: 1, capacity: 16384)) == nil, "another size")
        #expect(p.take(Prefaulter.Key<UInt8>(purpose: 2, capacity: 8192)) == nil, "another purpose")
        #expect(p.take(Prefaulter.Key<Int8>(purpose: 1, capacity: 8192)) == nil, "another type")
        #expect(p.take(key) != nil)
    }

    /// A take that finds nothing ready withdraws the ask when told to (a
    /// table that grew on its own never asks for that size again): nothing
    /// is left waiting; without, the array waits for the next take.
    @Test func aTakeThatMissesCanWithdrawTheAsk() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        // A large array first, so that the next ones are still queued when taken.
        let large = Prefaulter.Key<UInt8>(purpose: 9, capacity: 256 << 20)
        p.prepare(large)
        let withdrawn = Prefaulter.Key<UInt8>(purpose: 1, capacity: 8192)
        let kept = Prefaulter.Key<UInt8>(purpose: 2, capacity: 8192)
        p.prepare(withdrawn)
        p.prepare(kept)
        #expect(p.take(withdrawn, withdrawing: true) == nil && p.take(kept) == nil, "not made yet: the large one goes first")
        p.waitUntilMade()
        #expect(p.take(withdrawn) == nil, "a withdrawn ask was made anyway")
        #expect(p.take(kept) != nil, "an ask not withdrawn waits to be taken")
        // Withdrawn while being made: dropped once made.
        p.prepare(large)
        while p.take(large, withdrawing: true) == nil && !p.isIdle {}
        p.waitUntilMade()
        #expect(p.take(large) == nil)
    }

    /// A withdrawn ask is never handed out: made, queued or being made.
    @Test func aWithdrawnAskIsNeverHandedOut() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        let made = Prefaulter.Key<UInt8>(purpose: 1, capacity: 8192)
        p.prepare(made)
        p.waitUntilMade()
        p.withdraw(made)
        let large = Prefaulter.Key<UInt8>(purpose: 9, capacity: 256 << 20)
        let queued = Prefaulter.Key<UInt8>(purpose: 2, capacity: 8192)
        p.prepare(large)
        p.prepare(queued)
        p.withdraw(queued)
        p.withdraw(large)
        p.waitUntilMade()
        #expect(p.take(made) == nil && p.take(queued) == nil && p.take(large) == nil)
        #expect(p.taken() == 0)
        // Asked for again after a withdrawal: made again.
        p.prepare(made)
        p.waitUntilMade()
        #expect(p.take(made) != nil)
    }

    /// A prefaulter let go without `stop` stops its thread all the same.
    @Test func aPrefaulterLetGoEndsItsThread() throws {
        let name = "tpf-\(getpid() % 1000)"
        func threads() -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).filter { task in
                (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?.hasPrefix(name) == true
            }.count
        }
        do {
            let p = try #require(Prefaulter(threadName: name))
            p.prepare(Prefaulter.Key<UInt8>(purpose: 9, capacity: 1 << 20))
            p.waitUntilMade()
            #expect(threads() == 1)
        }
        var waited = 0
        while threads() > 0 && waited < 500 {
            usleep(10_000)
            waited += 1
        }
        #expect(threads() == 0, "the thread of a prefaulter let go without stop still runs")
    }

    @Test func afterStopNothingIsMadeOrWaits() throws {
        let p = try #require(Prefaulter())
        let made = Prefaulter.Key<UInt8>(purpose: 1, capacity: 8192)
        p.prepare(made)
        p.waitUntilMade()
        p.stop()
        #expect(p.take(made) == nil, "what was not taken is freed at stop")
        let later = Prefaulter.Key<UInt8>(purpose: 2, capacity: 8192)
        p.prepare(later)
        p.waitUntilMade()
        #expect(p.take(later) == nil && p.taken() == 0)
    }

    @Test func theCurrentPrefaulterIsTheReplayingThreadsOnly() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        #expect(Prefaulter.current == nil)
        Prefaulter.$current.withValue(p) {
            #expect(Prefaulter.current === p)
            let seen = Monitor<Bool?>(nil)
            #expect(throws: Never.self) { try Threads.start(name: "test-other") { seen.update { $0 = Prefaulter.current != nil } } }
            #expect(seen.wait { $0 } == false, "another thread found the replay's prefaulter")
        }
        #expect(Prefaulter.current == nil)
    }
}
