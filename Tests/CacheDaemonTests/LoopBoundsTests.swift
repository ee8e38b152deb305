import Testing
@_spi(Harness) @testable import CacheDaemon
import CacheSystem

/// What bounds the whole process (docs/architecture.md, "What bounds the
/// whole process"): the mailbox's droppable deliveries, the totals' states
/// and the settings that set them.
@Suite struct LoopBoundsTests {
    static func delivery(_ connection: UInt64, _ slot: UInt64, _ bytes: Int, done: Bool = false, droppable: Bool = true) -> Delivery {
        Delivery(connection: connection, slot: slot, chunks: [.bytes([UInt8](repeating: 0x61, count: bytes))], done: done, droppable: droppable)
    }

    @Test func droppableDeliveriesOfOneAnswerAreCoalescedUpToTheirBound() throws {
        let m = try Mailbox()
        // 200 subscribers x 5,000 events of 100 bytes: one delivery each,
        // at most 64 KiB of it, the rest dropped before it was queued.
        for _ in 0..<5_000 { for s in 0..<200 { m.post(Self.delivery(UInt64(s), 0, 100)) } }
        let (deliveries, dropped) = m.drain()
        #expect(deliveries.count == 200)
        #expect(deliveries.allSatisfy { $0.byteCount <= Mailbox.maxCoalescedBytes && $0.byteCount >= Mailbox.maxCoalescedBytes - 100 })
        #expect(deliveries.reduce(0) { $0 + $1.byteCount } <= Mailbox.maxDroppableBytes)
        #expect(dropped == 1_000_000 - deliveries.reduce(0) { $0 + $1.chunks.count })
        #expect(m.drain().deliveries.isEmpty, "a drain takes everything")
    }

    @Test func allDroppableDeliveriesTogetherStayUnderTheirBound() throws {
        let m = try Mailbox()
        for c in 0..<10_000 { m.post(Self.delivery(UInt64(c), 0, 4096)) }
        let (deliveries, dropped) = m.drain()
        #expect(deliveries.reduce(0) { $0 + $1.byteCount } <= Mailbox.maxDroppableBytes)
        #expect(deliveries.count == Mailbox.maxDroppableBytes / 4096)
        #expect(dropped == 10_000 - deliveries.count)
    }

    @Test func nothingIsMergedAheadOfAnAnswersNonDroppablePart() throws {
        let m = try Mailbox()
        m.post(Self.delivery(1, 7, 10))                                      // progress
        m.post(Self.delivery(1, 7, 20, done: true, droppable: false))        // the answer
        m.post(Self.delivery(1, 7, 30))                                      // later progress: after it
        m.post(Self.delivery(1, 8, 40, droppable: false))                    // another answer, never dropped
        for _ in 0..<100_000 { m.post(Self.delivery(2, 0, 1000, droppable: false)) }  // non-droppable: all kept
        let (deliveries, dropped) = m.drain()
        #expect(Array(deliveries.prefix(4).map(\.byteCount)) == [10, 20, 30, 40])
        #expect(deliveries.count == 100_004)
        #expect(dropped == 0)
    }

    @Test func theTotalsPauseHoldersAtTheBoundAndResumeAtThreeQuarters() {
        let t = OutputTotals(maxBytes: 1000, maxDescriptors: 100)
        t.bytes = 999; t.check()
        #expect(!t.full && !t.pauses(holdingAnswers: true))
        t.bytes = 1000; t.check()
        #expect(t.pauses(holdingAnswers: true) && !t.pauses(holdingAnswers: false), "a connection holding nothing is still read")
        t.bytes = 5000; t.check()
        #expect(!t.pauses(holdingAnswers: false), "however far over: a liveness ping on a clean connection is answered")
        t.bytes = 751; t.check()
        #expect(t.full && !t.resumeDue, "no flapping: still full above three quarters")
        t.bytes = 750; t.check()
        #expect(!t.full && !t.pauses(holdingAnswers: true) && t.resumeDue)
        t.descriptors = 100; t.check()
        #expect(t.pauses(holdingAnswers: true), "descriptors count as bytes do")
    }

    @Test func maxQueuedBytesTotalIsASizeOfAtLeastOneMegabyte() throws {
        guard case .run(let s) = try Settings.parse(arguments: ["--max-queued-bytes-total", "64M"], environment: [:]) else {
            Issue.record("not a run"); return
        }
        #expect(s.loopLimits.maxQueuedBytesTotal == 64 << 20)
        #expect(throws: SettingsError.self) { try Settings.parse(arguments: ["--max-queued-bytes-total", "512K"], environment: [:]) }
        #expect(throws: SettingsError.self) { try Settings.parse(arguments: [], environment: ["CACHED_MAX_QUEUED_BYTES_TOTAL": "lots"]) }
    }
}
