import Testing
@testable import CacheStore

@Suite struct RecordCodecTests {
    static let samples: [LogRecord] = [
        .post(id: 1, json: Array(#"{"id":1,"title":"é"}"#.utf8)),
        .post(id: -42, json: []),
        .post(id: Int64.max, json: Array("{}".utf8)),
        .postRemoved(id: Int64.min),
        .manifestSize(count: 0),
        .manifestSize(count: 1_000_000),
        .row(row: 3, url: "images/a.png", description: "A"),
        .row(row: 0, url: "", description: nil),
        .rowObject(row: 7, hash: Hash128(of: Array("x".utf8)), size: 123_456_789, type: .webp),
        .objectRemoved(hash: Hash128(high: .max, low: 0)),
        .validators(feed: .posts, etag: "\"abc\"", lastModified: nil),
        .validators(feed: .manifest, etag: nil, lastModified: "Sun, 29 Nov 2026 10:00:00 GMT"),
        .access(hash: Hash128(of: Array("y".utf8)), time: 1_796_000_000_123),
        .commit,
    ]

    @Test(arguments: samples)
    func roundTrips(_ record: LogRecord) throws {
        let framed = RecordCodec.encode(record)
        let length = Int(framed[0..<8].uint32LE(at: 0))
        #expect(length == framed.count - 8)
        #expect(try RecordCodec.decodePayload(framed[8...]) == record)
    }

    @Test func rejectsUnknownTypeAndTrailingBytes() {
        #expect(throws: RecordDecodingError.self) { try RecordCodec.decodePayload([0x55][...]) }
        var p = Array(RecordCodec.encode(.postRemoved(id: 5))[8...])
        p.append(0)
        #expect(throws: RecordDecodingError.self) { try RecordCodec.decodePayload(p[...]) }
        #expect(throws: RecordDecodingError.self) { try RecordCodec.decodePayload([5, 1][...]) }
    }
}

@Suite struct LogScannerTests {
    /// A log of three committed transactions.
    static func threeTransactions() -> (bytes: [UInt8], ends: [Int]) {
        var bytes = RecordCodec.fileHeader
        var ends: [Int] = []
        for t in 0..<3 {
            RecordCodec.encode(.post(id: Int64(t), json: Array("{\"id\":\(t)}".utf8)), into: &bytes)
            RecordCodec.encode(.manifestSize(count: t), into: &bytes)
            RecordCodec.encode(.commit, into: &bytes)
            ends.append(bytes.count)
        }
        return (bytes, ends)
    }

    @Test func replaysEveryCommittedTransaction() {
        let (bytes, ends) = Self.threeTransactions()
        var seen: [[LogRecord]] = []
        let outcome = LogScanner.scan(bytes) { seen.append($0) }
        #expect(outcome == ScanOutcome(validLength: ends[2], records: 9, problem: nil))
        #expect(seen.count == 3)
        #expect(seen[1] == [.post(id: 1, json: Array("{\"id\":1}".utf8)), .manifestSize(count: 1)])
    }

    @Test func tornTailAtEveryOffsetKeepsEarlierTransactions() {
        let (bytes, ends) = Self.threeTransactions()
        for cut in ends[1]..<ends[2] {
            var applied = 0
            let outcome = LogScanner.scan(Array(bytes[0..<cut])) { _ in applied += 1 }
            #expect(outcome.validLength == ends[1], "cut at \(cut)")
            #expect(applied == 2, "cut at \(cut)")
            #expect((outcome.problem != nil) == (cut > ends[1]), "cut at \(cut)")
        }
    }

    @Test func bitFlipInAnyRecordStopsReplayThere() {
        let (bytes, ends) = Self.threeTransactions()
        for offset in ends[0]..<ends[1] {
            var damaged = bytes
            damaged[offset] ^= 0x40
            var applied = 0
            let outcome = LogScanner.scan(damaged) { _ in applied += 1 }
            #expect(outcome.validLength == ends[0], "flip at \(offset)")
            #expect(applied == 1, "flip at \(offset)")
            #expect(outcome.problem != nil)
        }
    }

    @Test func randomGarbageAfterTheLogIsCut() {
        var (bytes, ends) = Self.threeTransactions()
        var rng = SystemRandomNumberGenerator()
        bytes += (0..<1000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let outcome = LogScanner.scan(bytes) { _ in }
        #expect(outcome.validLength == ends[2])
        #expect(outcome.problem != nil)
    }

    @Test func uncommittedRecordsAreNotApplied() {
        var (bytes, ends) = Self.threeTransactions()
        RecordCodec.encode(.postRemoved(id: 0), into: &bytes)
        var all: [LogRecord] = []
        let outcome = LogScanner.scan(bytes) { all += $0 }
        #expect(outcome.validLength == ends[2])
        #expect(!all.contains(.postRemoved(id: 0)))
        #expect(outcome.problem?.contains("uncommitted") == true)
    }

    @Test func wrongHeaderKeepsNothing() {
        let outcome = LogScanner.scan(Array("NOTALOG!and more".utf8)) { _ in }
        #expect(outcome.validLength == 0)
        #expect(outcome.problem != nil)
        #expect(LogScanner.scan([]) { _ in } == ScanOutcome(validLength: 0, records: 0, problem: nil))
    }

    @Test func hugeLengthIsCorruptionNotAnAllocation() {
        var bytes = RecordCodec.fileHeader
        bytes += [0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0, 1]
        let outcome = LogScanner.scan(bytes) { _ in }
        #expect(outcome.validLength == RecordCodec.fileHeader.count)
        #expect(outcome.problem?.contains("length") == true)
    }
}
