import CacheSystem
import Foundation
import Testing
import TestSupport
@testable import CacheStore

@Suite struct RecordCodecTests {
    static let samples: [LogRecord] = [
        .post(id: .int(1), json: Array(#"{"id":1,"title":"é"}"#.utf8)),
        .post(id: .int(-42), json: []),
        .post(id: .int(Int64.max), json: Array("{}".utf8)),
        .postRemoved(id: .int(Int64.min)),
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
        // Well-formed but unknown: what a newer cached writes.
        #expect(throws: RecordDecodingError.unknown("unknown record type 0x55")) { try RecordCodec.decodePayload([0x55][...]) }
        var p = Array(RecordCodec.encode(.postRemoved(id: .int(5)))[8...])
        p.append(0)
        #expect(throws: RecordDecodingError.unknown("1 bytes after the last known field of a postRemoved (type 0x02) record")) {
            try RecordCodec.decodePayload(p[...])
        }
        // Malformed: a field ends early, a varint runs past 64 bits.
        #expect(throws: RecordDecodingError(description: "record ends early")) { try RecordCodec.decodePayload([5, 1][...]) }
        #expect(throws: RecordDecodingError(description: "varint overflow")) {
            try RecordCodec.decodePayload([2] + [UInt8](repeating: 0xFF, count: 10) + [1])
        }
    }

    /// Every enumerated field: a value past the known ones is "unknown", not damage.
    @Test func unknownFieldValuesAreUnknownNotMalformed() throws {
        var image = Array(RecordCodec.encode(.rowObject(row: 1, hash: Hash128(of: [1]), size: 2, type: .png))[8...])
        image[image.count - 1] = 200
        var feed = Array(RecordCodec.encode(.validators(feed: .manifest, etag: nil, lastModified: nil))[8...])
        feed[1] = 0
        var flag = Array(RecordCodec.encode(.validators(feed: .manifest, etag: nil, lastModified: nil))[8...])
        flag[2] = 7
        for payload in [image, feed, flag] {
            do {
                _ = try RecordCodec.decodePayload(payload[...])
                Issue.record("decoded \(payload)")
            } catch {
                #expect(error.kind == .unknown, "\(error)")
            }
        }
    }
}

/// docs/storage-format.md, "index.log", "Byte by byte": the example there
/// is exactly what the encoder writes, so the document cannot drift.
@Suite struct DocumentedLogBytesTests {
    static let records: [LogRecord] = [.post(id: .int(300), json: Array(#"{"id":300}"#.utf8)), .commit]

    /// The version-2 example: a string id, an order, a page.
    static let versionTwoRecords: [LogRecord] = [
        .post(id: .int(7), json: Array(#"{"id":7}"#.utf8)),
        .post(id: .string("a/b"), json: Array(#"{"id":"a/b"}"#.utf8)),
        .postOrder(start: 0, ids: [.string("a/b"), .int(7)]),
        .page(feed: .posts, index: 0, page: FeedPage(url: "https://o.test/p", validators: Validators(etag: "\"x\""), next: nil, count: 2)),
        .commit,
    ]

    /// The `offset  bytes  field` lines of the example block under `heading`
    /// (the first block after it), as (offset, bytes).
    static func documentedLines(_ heading: String = "### Byte by byte\n") throws -> [(offset: Int, bytes: [UInt8])] {
        var docs = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { docs.deleteLastPathComponent() }
        let text = try String(contentsOf: docs.appendingPathComponent("docs/storage-format.md"), encoding: .utf8)
        guard let section = text.range(of: heading) else { return [] }
        let after = text[section.upperBound...]
        guard let open = after.range(of: "```\n"), let close = after[open.upperBound...].range(of: "```") else { return [] }
        let lines = after[open.upperBound..<close.lowerBound].split(separator: "\n").dropFirst()  // the column titles
        return try lines.map { line in
            let columns = line.components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard columns.count == 3, let offset = Int(columns[0]) else { throw DocumentError(line: String(line)) }
            let bytes = try columns[1].split(separator: " ").map { hex in
                guard hex.count == 2, let b = UInt8(hex, radix: 16) else { throw DocumentError(line: String(line)) }
                return b
            }
            return (offset, bytes)
        }
    }

    struct DocumentError: Error { var line: String }

    @Test func theDocumentedExampleIsWhatTheEncoderWrites() throws {
        var encoded = RecordCodec.header(version: 1)
        for r in Self.records { RecordCodec.encode(r, into: &encoded) }
        let lines = try Self.documentedLines()
        #expect(lines.count == 10)
        var offset = 0
        for line in lines {
            #expect(line.offset == offset, "the line at \(line.offset) should be at \(offset)")
            offset += line.bytes.count
        }
        #expect(lines.flatMap(\.bytes) == encoded)
        // The same bytes, spelled out here too: a change of the encoder shows in this file's diff.
        #expect(encoded == [0x43, 0x41, 0x43, 0x48, 0x45, 0x44, 0x4C, 0x01,
                            0x0E, 0x00, 0x00, 0x00, 0x09, 0x29, 0x21, 0x73,
                            0x01, 0xD8, 0x04, 0x0A, 0x7B, 0x22, 0x69, 0x64, 0x22, 0x3A, 0x33, 0x30, 0x30, 0x7D,
                            0x01, 0x00, 0x00, 0x00, 0x81, 0xF1, 0x5F, 0xF4, 0x7F])
    }

    @Test func theDocumentedVersionTwoExampleIsWhatTheEncoderWrites() throws {
        var encoded = RecordCodec.header(version: 2)
        for r in Self.versionTwoRecords { RecordCodec.encode(r, into: &encoded) }
        let lines = try Self.documentedLines("### Byte by byte, version 2\n")
        #expect(lines.count == 38)
        var offset = 0
        for line in lines {
            #expect(line.offset == offset, "the line at \(line.offset) should be at \(offset)")
            offset += line.bytes.count
        }
        #expect(lines.flatMap(\.bytes) == encoded)
        var transactions: [[LogRecord]] = []
        let outcome = LogScanner.scan(encoded) { transactions.append($0) }
        #expect(outcome == ScanOutcome(validLength: 116, records: 5, problem: nil, version: 2))
        #expect(transactions == [Array(Self.versionTwoRecords.dropLast())])
        var state = StoreState()
        for t in transactions { state.apply(transaction: t) }
        state.orderPosts()
        #expect(state.listIDs == [.string("a/b"), .int(7)])
    }

    /// The version-4 example's object: a PNG signature, then zeros, 1 MiB and a byte in all.
    static let versionFourObject: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 0, count: (1 << 20) + 1 - 8)

    @Test func theDocumentedVersionFourExampleIsWhatTheEncoderWrites() throws {
        let object = Self.versionFourObject
        let hash = Hash128(of: object)
        #expect(hash.hex == "e755a390371de9864318b9cbfbb2c3be")
        let chunks = ChunkDigests(shift: 20, digests: [Hash128(of: Array(object[..<(1 << 20)])), Hash128(of: [0])])
        let records: [LogRecord] = [.rowObject(row: 0, hash: hash, size: Int64(object.count), type: .png),
                                    .objectChunks(hash: hash, chunks: chunks), .commit]
        var encoded = RecordCodec.header(version: 4)
        for r in records { RecordCodec.encode(r, into: &encoded) }
        let lines = try Self.documentedLines("### Byte by byte, version 4\n")
        #expect(lines.count == 19)
        var offset = 0
        for line in lines {
            #expect(line.offset == offset, "the line at \(line.offset) should be at \(offset)")
            offset += line.bytes.count
        }
        #expect(lines.flatMap(\.bytes) == encoded)
        var transactions: [[LogRecord]] = []
        let outcome = LogScanner.scan(encoded) { transactions.append($0) }
        #expect(outcome == ScanOutcome(validLength: 106, records: 3, problem: nil, version: 4))
        var state = StoreState()
        for t in transactions { state.apply(transaction: t) }
        #expect(state.chunks[hash] == chunks, "the digests replay onto the object")
        // And what the writer computes for that object is what the block says.
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let w = try ChunkFixtures.writer(object, store)
        defer { w.discard() }
        #expect(w.hash == hash && w.chunkDigests == chunks)
    }

    @Test func theDocumentedExampleReplaysToItsPost() throws {
        let bytes = try Self.documentedLines().flatMap(\.bytes)
        var transactions: [[LogRecord]] = []
        let outcome = LogScanner.scan(bytes) { transactions.append($0) }
        #expect(outcome == ScanOutcome(validLength: 39, records: 2, problem: nil))
        #expect(transactions == [[Self.records[0]]])
    }
}

@Suite struct LogScannerTests {
    /// A log of three committed transactions.
    static func threeTransactions() -> (bytes: [UInt8], ends: [Int]) {
        var bytes = RecordCodec.fileHeader
        var ends: [Int] = []
        for t in 0..<3 {
            RecordCodec.encode(.post(id: .int(Int64(t)), json: Array("{\"id\":\(t)}".utf8)), into: &bytes)
            RecordCodec.encode(.manifestSize(count: t), into: &bytes)
            RecordCodec.encode(.commit, into: &bytes)
            ends.append(bytes.count)
        }
        return (bytes, ends)
    }

    /// The replay at start reads the log a piece at a time (8 MiB): records
    /// across pieces, records larger than a piece, and every cut through
    /// them replay from the file as from the bytes in memory.
    @Test func aLogReadInPiecesReplaysAsItsBytesInMemory() throws {
        var (bytes, ends) = Self.threeTransactions()
        RecordCodec.encode(.post(id: .int(9), json: Array(repeating: UInt8(ascii: "x"), count: 5000)), into: &bytes)
        RecordCodec.encode(.commit, into: &bytes)
        ends.append(bytes.count)
        let path = try makeTempDirectory("log-pieces") + "/index.log"
        defer { try? FileManager.default.removeItem(atPath: path) }
        for cut in Array(0..<ends[0] + 3) + Array(ends[2] - 3...ends[3]) {
            let prefix = Array(bytes[0..<cut])
            try Data(prefix).write(to: URL(fileURLWithPath: path))
            var inMemory: [[LogRecord]] = []
            let expected = LogScanner.scan(prefix) { inMemory.append($0) }
            for piece in [1, 7, 64, 4096] {
                let fd = try FileDescriptor.open(path, .readOnly)
                defer { fd.close() }
                var read: [[LogRecord]] = []
                let outcome = try LogScanner.scan(reading: fd, piece: piece) { read.append($0) }
                #expect(outcome == expected, "cut \(cut), piece \(piece)")
                #expect(read == inMemory, "cut \(cut), piece \(piece)")
            }
        }
    }

    @Test func replaysEveryCommittedTransaction() {
        let (bytes, ends) = Self.threeTransactions()
        var seen: [[LogRecord]] = []
        let outcome = LogScanner.scan(bytes) { seen.append($0) }
        #expect(outcome == ScanOutcome(validLength: ends[2], records: 9, problem: nil, version: RecordCodec.formatVersion))
        #expect(seen.count == 3)
        #expect(seen[1] == [.post(id: .int(1), json: Array("{\"id\":1}".utf8)), .manifestSize(count: 1)])
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
        RecordCodec.encode(.postRemoved(id: .int(0)), into: &bytes)
        var all: [LogRecord] = []
        let outcome = LogScanner.scan(bytes) { all += $0 }
        #expect(outcome.validLength == ends[2])
        #expect(!all.contains(.postRemoved(id: .int(0))))
        #expect(outcome.problem?.contains("uncommitted") == true)
    }

    @Test func wrongHeaderKeepsNothing() {
        let outcome = LogScanner.scan(Array("NOTALOG!and more".utf8)) { _ in }
        #expect(outcome.validLength == 0)
        #expect(outcome.problem != nil)
        #expect(LogScanner.scan([]) { _ in } == ScanOutcome(validLength: 0, records: 0, problem: nil, version: 0))
    }

    @Test func aNewerHeaderOrRecordStopsTheScanAsNewerNotDamage() {
        var newerHeader = Self.threeTransactions().bytes
        newerHeader[7] = RecordCodec.formatVersion + 1
        let header = LogScanner.scan(newerHeader) { _ in Issue.record("nothing may be applied") }
        #expect(header.newer == .formatVersion(RecordCodec.formatVersion + 1))
        #expect(header.validLength == 0)

        var (bytes, ends) = Self.threeTransactions()
        bytes += frame([0x17, 0xAA]) + RecordCodec.encode(.commit)
        let record = LogScanner.scan(bytes) { _ in }
        #expect(record.newer == .record(offset: ends[2], what: "unknown record type 0x17"))
        #expect(record.problem == "written by a newer cached: unknown record type 0x17 at offset \(ends[2]) of index.log")

        // The same bytes with a wrong checksum are damage.
        bytes[ends[2] + 4] ^= 1
        let damaged = LogScanner.scan(bytes) { _ in }
        #expect(damaged.newer == nil)
        #expect(damaged.validLength == ends[2])
        #expect(damaged.problem == "checksum mismatch at offset \(ends[2])")
    }

    @Test func hugeLengthIsCorruptionNotAnAllocation() {
        var bytes = RecordCodec.fileHeader
        bytes += [0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0, 1]
        let outcome = LogScanner.scan(bytes) { _ in }
        #expect(outcome.validLength == RecordCodec.fileHeader.count)
        #expect(outcome.problem?.contains("length") == true)
    }
}
