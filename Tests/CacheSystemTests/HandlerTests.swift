import Testing
@testable import CacheSystem

/// Closures kept behind a lock (Handler.swift): reading one back any number
/// of times leaves it as deep to call as it was. Before the fix, a bare
/// closure in a `Locked` read back 1,000 times was 64 KiB of stack deep to
/// call (two reabstraction thunks per read), and the daemon with HTTP on
/// crashed after about 5,000 events (issue 22).
@Suite struct HandlerTests {
    /// The address of a local of a frame called from the caller's.
    @inline(never) static func stackAddress() -> UInt {
        var local = 0
        return withUnsafeMutablePointer(to: &local) { UInt(bitPattern: $0) }
    }

    /// Bytes of stack between a call of `handler` and the caller.
    static func depth(of handler: Handler<Void>, result: Locked<UInt>) -> UInt {
        let top = stackAddress()
        handler()
        let inner = result.withLock { $0 }
        return top > inner ? top - inner : inner - top
    }

    @Test func aHandlerReadBackAMillionTimesIsAsShallowToCall() {
        let seen = Locked<UInt>(0)
        let kept = Locked<Handler<Void>?>(Handler { seen.withLock { $0 = HandlerTests.stackAddress() } })
        let before = Self.depth(of: kept.withLock { $0 }!, result: seen)
        for _ in 0..<1_000_000 { _ = kept.withLock { $0 } }
        let after = Self.depth(of: kept.withLock { $0 }!, result: seen)
        #expect(after <= before + 256, "\(after) bytes deep after a million reads, \(before) before")
        #expect(after < 16 * 1024)
    }

    @Test func closuresInArraysAndDictionariesKeepOneRepresentation() {
        // What SingleFlight and the prefetch's listeners keep: the container
        // is not converted, so its closures are not rewrapped.
        let seen = Locked<UInt>(0)
        let kept = Locked<[String: [@Sendable () -> Void]]>(["k": [{ seen.withLock { $0 = HandlerTests.stackAddress() } }]])
        for _ in 0..<100_000 { _ = kept.withLock { $0 } }
        let top = Self.stackAddress()
        kept.withLock { $0 }["k"]![0]()
        let inner = seen.withLock { $0 }
        #expect((top > inner ? top - inner : inner - top) < 16 * 1024)
    }

    @Test func lockedRefusesTheShapesThatAreRewrapped() {
        typealias F = @Sendable (Int) -> Void
        #expect(Locked<Int>.isFunctionShaped(F.self))
        #expect(Locked<Int>.isFunctionShaped(F?.self))
        #expect(Locked<Int>.isFunctionShaped((() -> Void)?.self))
        #expect(Locked<Int>.isFunctionShaped((a: Int, b: F).self))
        #expect(!Locked<Int>.isFunctionShaped(Handler<Int>?.self))
        #expect(!Locked<Int>.isFunctionShaped([F].self))
        #expect(!Locked<Int>.isFunctionShaped([String: [F]].self))
        #expect(!Locked<Int>.isFunctionShaped((done: [Bool], failure: String?).self))
        #expect(!Locked<Int>.isFunctionShaped(Int.self))
    }
}
