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

    static func hash(_ n: Int) -> Hash128 { Hash128(high: UInt64(n) &* 0x9E37_79B9_7F4A_7C15, low: UInt64(n)) }

    /// A record of every kind StoreState applies, on few ids, rows and
    /// objects, so that records meet each other.
    static func randomRecord(_ g: inout SplitMix) -> LogRecord {
        let n = Int(g.next() % 64)
        switch g.next() % 14 {
        case 0, 1: return .post(id: .int(Int64(n)), json: Array("{\"id\":\(n),\"title\":\"t\(g.next() % 9)\"}".utf8))
        case 2: return .post(id: .string("s\(n)"), json: Array("{\"id\":\"s\(n)\"}".utf8))
        case 3: return .postRemoved(id: .int(Int64(n)))
        case 4: return .manifestSize(count: n % 40)
        case 5: return .row(row: n % 40, url: "u\(g.next() % 5).png", description: n % 2 == 0 ? nil : "d")
        case 6, 7: return .rowObject(row: n % 40, hash: hash(n % 30), size: Int64(n + 1), type: .png)
        case 8, 9: return .objectRemoved(hash: hash(n % 30))
        case 10: return .access(hash: hash(n % 30), time: Int64(g.next() % 1000))
        case 11: return .postOrder(start: n % 10, ids: (0..<(n % 5)).map { .int(Int64($0 * 3 + n)) })
        case 12: return .page(feed: n % 2 == 0 ? .posts : .manifest, index: n % 3,
                              page: FeedPage(url: "p\(n)", validators: Validators(etag: "\"e\(n)\"", lastModified: nil), next: nil, count: n))
        default: return .variant(source: hash(n % 30), spec: VariantSpec(width: 10 + n % 3, height: 10, fit: .contain, format: .webp),
                                 variant: VariantRef(object: ObjectRef(hash: hash(100 + n % 7), size: 5, type: .webp), width: 10, height: 10))
        }
    }

    /// Applying a transaction in parts is applying it whole: random
    /// transactions of every record kind, with runs of removals, applied
    /// whole, in random parts and in parts as the replay cuts them, give
    /// equal states (the review's test, kept).
    @Test func partsOfATransactionApplyAsTheWhole() {
        var g = SplitMix(state: 7)
        for round in 0..<20 {
            var whole = StoreState(), parts = StoreState(), replayed = StoreState()
            for _ in 0..<3 {
                var t: [LogRecord] = []
                for _ in 0..<Int(g.next() % 9000) {
                    if g.next() % 50 == 0 { t += (0..<Int(g.next() % 200)).map { _ in .objectRemoved(hash: Self.hash(Int(g.next() % 30))) } }
                    t.append(Self.randomRecord(&g))
                }
                whole.apply(transaction: t)
                var i = 0
                while i < t.count {
                    let k = 1 + Int(g.next() % 700)
                    parts.apply(transaction: Array(t[i..<min(t.count, i + k)]))
                    i += k
                }
                var bytes = RecordCodec.fileHeader
                for r in t + [.commit] { RecordCodec.encode(r, into: &bytes) }
                _ = LogScanner.scan(bytes) { replayed.apply(transaction: $0) }
            }
            #expect(Self.same(whole, parts), "round \(round): random parts")
            #expect(Self.same(whole, replayed), "round \(round): the replay's parts")
        }
    }

    /// Every part of the state a record can change.
    static func same(_ a: StoreState, _ b: StoreState) -> Bool {
        a.posts == b.posts && a.recordedOrder == b.recordedOrder && a.rows == b.rows && a.objects == b.objects
            && a.objects.lastUses == b.objects.lastUses && a.chunks == b.chunks && a.variants == b.variants
            && a.variantObjects == b.variantObjects && a.variantBytes == b.variantBytes && a.pages == b.pages
            && a.manifestKnown == b.manifestKnown && a.bytes == b.bytes && a.manifestGeneration == b.manifestGeneration
            && a.postsGeneration == b.postsGeneration && a.damagedValidators == b.damagedValidators && a.unloggedUse == b.unloggedUse
    }

    /// A part never ends inside a run of removals (StoreState applies a run
    /// with one pass over every row: a million removals cut every 4,096
    /// records took 34 s where whole they took 2.4).
    @Test func aRunOfRemovalsIsNeverCutIntoParts() {
        let run = Self.held + 700
        var bytes = RecordCodec.fileHeader
        let records: [LogRecord] = (0..<1000).map(Self.post) + (0..<run).map { .objectRemoved(hash: Self.hash($0)) } + (0..<10).map(Self.post)
        for r in records + [.commit] { RecordCodec.encode(r, into: &bytes) }
        var parts: [[LogRecord]] = []
        _ = LogScanner.scan(bytes) { parts.append($0) }
        #expect(parts.map(\.count) == [1000 + run, 10], "the run ends its part")
        #expect(Array(parts.joined()) == records)
    }

    /// The log cut between the two reads of a large transaction (which the
    /// store's lock rules out; here the test cuts it from `apply`): the
    /// open fails, saying so, rather than apply half of the transaction as
    /// if it were whole, and nothing of the file is cut or set aside.
    @Test func aLogThatChangesDuringTheSecondReadFailsTheOpen() throws {
        let dir = try makeTempDirectory("large-transaction-cut")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Larger than the window's 8 MiB piece, so that the second read reads the file again.
        var bytes = RecordCodec.fileHeader
        RecordCodec.encode(Self.post(-1), into: &bytes)
        RecordCodec.encode(.commit, into: &bytes)
        var ends = [bytes.count]
        for i in 0..<12_000 { RecordCodec.encode(.post(id: .int(Int64(i)), json: Array(repeating: UInt8(ascii: "x"), count: 1000)), into: &bytes) }
        RecordCodec.encode(.commit, into: &bytes)
        ends.append(bytes.count)
        let path = dir + "/index.log"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let cut = ends[0] + (ends[1] - ends[0]) / 2
        let files = try ConfinedDirectory(opening: dir)
        defer { files.close() }
        var parts: [Int] = []
        do throws(IndexLogError) {
            let log = try IndexLog(directory: files, name: "index.log") { t in
                parts.append(t.count)
                if parts.count == 2 {
                    let fd = try! FileDescriptor.open(path, .readWrite)
                    try! fd.truncate(to: Int64(cut))
                    fd.close()
                }
            }
            log.close()
            Issue.record("opened after the cut: parts \(parts)")
        } catch {
            #expect("\(error)".contains("index.log changed while it was read"), "\(error)")
        }
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == cut, "the file is left as it was found")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["index.log"], "nothing set aside")
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
