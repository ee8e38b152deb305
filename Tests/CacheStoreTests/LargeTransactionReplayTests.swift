import Foundation
import Testing
@testable import CacheStore
import CacheSystem
import TestSupport

/// A transaction of more than `LogScanner.heldRecords` records (a refresh
/// of a million posts) is read whole and checked before any of it is
/// applied, then applied in parts as it is read again: the same records,
/// in the same order, and nothing of it when any of it is torn or damaged.
@Suite struct LargeTransactionReplayTests {
    static let held = LogScanner.heldRecords

    static func post(_ i: Int) -> LogRecord {
        .post(id: .int(Int64(i)), json: Array("{\"id\":\(i),\"title\":\"post \(i)\"}".utf8))
    }

    /// A small transaction, one of `big` posts and a manifest size, and a
    /// small one after: the log's bytes, the records of each, and where each
    /// transaction's records and commit begin.
    static func log(big: Int) -> (bytes: [UInt8], transactions: [[LogRecord]], starts: [Int], ends: [Int]) {
        var bytes = RecordCodec.fileHeader
        let transactions: [[LogRecord]] = [[post(-1)], (0..<big).map(post) + [.manifestSize(count: 3)], [post(-2)]]
        var starts: [Int] = [], ends: [Int] = []
        for t in transactions {
            for r in t {
                starts.append(bytes.count)
                RecordCodec.encode(r, into: &bytes)
            }
            RecordCodec.encode(.commit, into: &bytes)
            ends.append(bytes.count)
        }
        return (bytes, transactions, starts, ends)
    }

    @Test func aLargeTransactionIsAppliedInPartsInOrder() throws {
        let big = 2 * Self.held + 1000
        let (bytes, transactions, _, ends) = Self.log(big: big)
        var parts: [[LogRecord]] = []
        let outcome = LogScanner.scan(bytes) { parts.append($0) }
        #expect(outcome == ScanOutcome(validLength: ends[2], records: (1 + 1) + (big + 1 + 1) + (1 + 1), problem: nil, version: RecordCodec.formatVersion))
        #expect(parts.map(\.count) == [1, Self.held, Self.held, 1001, 1])
        #expect(Array(parts[1...3].joined()) == transactions[1], "every record, in order")
        // Read from the file in pieces of every size, the same.
        let path = try makeTempDirectory("large-transaction") + "/index.log"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        for piece in [7, 4096, 1 << 20] {
            let fd = try FileDescriptor.open(path, .readOnly)
            defer { fd.close() }
            var read: [[LogRecord]] = []
            #expect(try LogScanner.scan(reading: fd, piece: piece) { read.append($0) } == outcome, "piece \(piece)")
            #expect(read == parts, "piece \(piece)")
        }
    }

    /// Exactly `heldRecords` records are held and applied whole, as before.
    @Test func aTransactionOfHeldRecordsIsAppliedWhole() {
        let (bytes, _, _, _) = Self.log(big: Self.held - 1)  // and the manifest size: held records
        var parts: [[LogRecord]] = []
        _ = LogScanner.scan(bytes) { parts.append($0) }
        #expect(parts.map(\.count) == [1, Self.held, 1])
    }

    @Test func aLargeTransactionTornOrDamagedAnywhereIsNotApplied() throws {
        let big = Self.held + 500
        let (bytes, _, starts, ends) = Self.log(big: big)
        // Torn: the log ends inside the large transaction, or just before its commit.
        for cut in [starts[1] + 10, starts[Self.held + 1] + 3, ends[1] - 1] {
            var parts: [[LogRecord]] = []
            let outcome = LogScanner.scan(Array(bytes[..<cut])) { parts.append($0) }
            #expect(parts.map(\.count) == [1], "cut \(cut): only the first transaction")
            #expect(outcome.validLength == ends[0] && outcome.problem != nil, "cut \(cut): \(outcome.problem ?? "")")
        }
        let torn = LogScanner.scan(Array(bytes[..<(ends[1] - 1)])) { _ in }
        #expect(torn.problem?.contains("torn record") == true || torn.problem?.contains("uncommitted transaction of \(big + 1) records") == true,
                "\(torn.problem ?? "")")
        let uncommitted = LogScanner.scan(Array(bytes[..<(ends[1] - 5)] )) { _ in }
        #expect(uncommitted.validLength == ends[0])
        // Damaged: a byte of a record before the switch to parts, and one after it.
        for record in [10, Self.held + 100] {
            var damaged = bytes
            damaged[starts[1 + record] + RecordCodec.frameHeaderSize + 2] ^= 0x40
            var parts: [[LogRecord]] = []
            let outcome = LogScanner.scan(damaged) { parts.append($0) }
            #expect(parts.map(\.count) == [1], "record \(record) damaged: nothing of its transaction")
            #expect(outcome.validLength == ends[0] && outcome.problem?.contains("checksum mismatch") == true, "\(outcome.problem ?? "")")
        }
    }

    /// A store whose log holds a million-post refresh as one transaction
    /// (here 10,000 posts) opens with every post, as it would from
    /// transactions of 64.
    @Test func aStoreOpensFromOneLargeTransaction() throws {
        let dir = try makeTempDirectory("large-transaction-store")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (bytes, _, _, _) = Self.log(big: 10_000)
        try Data(bytes).write(to: URL(fileURLWithPath: dir + "/index.log"))
        let store = try Store(StoreConfiguration(directory: dir))
        defer { store.close() }
        #expect(store.stats().posts == 10_002)
        #expect(store.post(id: .int(9_999)) == Array("{\"id\":9999,\"title\":\"post 9999\"}".utf8))
        #expect(store.post(id: .int(-2)) != nil && store.post(id: .int(0)) != nil)
    }
}
