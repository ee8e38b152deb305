import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// `open` of many objects (`hashes`) over the real socket: one line with
/// each object's outcome in order and the descriptors of those opened
/// passed with it; a request refused whole; an object that fails alone; a
/// client that never reads; a daemon out of descriptors.
@Suite struct OpenManyTests {
    /// One request line sent on a fresh connection, its answer line read with
    /// `recvmsg` as it comes (room for every descriptor one message passes).
    static func exchange(_ socket: String, _ fields: [(String, JSON)]) throws -> (JSON, [FileDescriptor]) {
        let fd = try UnixSocket.connect(path: socket)
        defer { fd.close() }
        try Request.line(op: "open", fields).withBytes { (raw) throws(SystemError) in
            var off = 0
            while off < raw.count { off += try UnixSocket.send(fd, UnsafeRawBufferPointer(rebasing: raw[off...])) }
        }
        var line: [UInt8] = []
        var descriptors: [FileDescriptor] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while line.last != 0x0A {
            let got = try buffer.withMutableBytes { (raw) throws(SystemError) in
                try UnixSocket.receive(fd, into: raw, maxDescriptors: UnixSocket.maxPassedDescriptors)
            }
            let n = try #require(got.count)
            try #require(n > 0, "the daemon closed the connection")
            #expect(!got.truncated)
            line += buffer[0..<n]
            descriptors += got.descriptors
        }
        return (try JSONParser.parse(line.dropLast()), descriptors)
    }

    @Test(arguments: ["always", "on-change"])
    func eachObjectComesInOrderWithItsOwnDescriptor(verifyReads: String) throws {
        let origin = try Origin()
        let (daemon, rows) = try OpenTests.prefetched(origin, arguments: ["--verify-reads", verifyReads])
        // Every row (the last over 256 KiB: opened on a worker), then the
        // first three again: a hash named twice is opened twice.
        let asked = rows.map(\.hash) + rows.prefix(3).map(\.hash)
        let client = try daemon.client()
        let answer = try client.open(hashes: asked)
        guard case let .objects(objects, line) = answer else {
            Issue.record("\(answer.answer)")
            return
        }
        defer { answer.close() }
        #expect(line["opened"]?.int == asked.count)
        #expect(objects.count == asked.count)
        for (i, object) in objects.enumerated() {
            let expected = rows[i < rows.count ? i : i - rows.count]
            guard case let .file(fd, size) = object else {
                Issue.record("entry \(i): \(object)")
                continue
            }
            #expect(line["objects"]?.array?[i]["hash"]?.string == asked[i], "entry \(i)")
            #expect(size == Int64(expected.bytes.count), "entry \(i)")
            #expect(lseek(fd.rawValue, 0, SEEK_CUR) == 0, "entry \(i): the position is 0")
            #expect(fcntl(fd.rawValue, F_GETFL) & O_ACCMODE == O_RDONLY, "entry \(i)")
            #expect(try OpenTests.contents(fd) == expected.bytes, "entry \(i)")
        }
        let first = try #require(objects[0].file), again = try #require(objects[rows.count].file)
        #expect(first.rawValue != again.rawValue, "each naming its own descriptor")
        #expect(client.pendingDescriptors == 0, "exactly one descriptor per object opened")
        #expect(try client.call("ping")["ok"] == .bool(true), "the connection is usable after it")
    }

    @Test func aRequestThatCannotBeReadIsRefusedWholeWithNoDescriptor() throws {
        let origin = try Origin()
        let (daemon, rows) = try OpenTests.prefetched(origin)
        let good = JSON.string(rows[0].hash)
        let cases: [([(String, JSON)], String)] = [
            ([("hashes", .array([]))], #""hashes" is empty: name 1 to 64 objects"#),
            ([("hashes", .array(Array(repeating: good, count: 65)))], #""hashes" names 65 objects; one request opens at most 64"#),
            ([("hashes", .array([good, good, good, .string(String(repeating: "A", count: 32)), good]))], #""hashes"[3] must be 32 lowercase hex digits"#),
            ([("hashes", .array([good, .number("7")]))], #""hashes"[1] must be 32 lowercase hex digits"#),
            ([("hashes", .string(rows[0].hash))], #""hashes" must be an array of hashes"#),
            ([("hash", good), ("hashes", .array([good]))], #"give "hash" (one object) or "hashes" (many), not both"#),
        ]
        for (fields, message) in cases {
            let (answer, descriptors) = try Self.exchange(daemon.socket, fields + [("tag", .string("t"))])
            #expect(answer["ok"] == .bool(false) && answer["error"]?["code"] == .string("bad_request"), "\(answer)")
            #expect(answer["error"]?["message"] == .string(message), "\(answer)")
            #expect(answer["tag"] == .string("t"))
            #expect(descriptors.isEmpty, "\(message): \(descriptors.count) descriptors came with a refusal")
            for d in descriptors { d.close() }
        }
        // 64, the bound itself, is one request; `hashes` null is no batch.
        let (full, passed) = try Self.exchange(daemon.socket, [("hashes", .array(Array(repeating: good, count: 64)))])
        #expect(full["opened"]?.int == 64 && passed.count == 64, "\(full["opened"] ?? .null)")
        for d in passed { d.close() }
        let (single, one) = try Self.exchange(daemon.socket, [("hash", good), ("hashes", .null)])
        #expect(single["size"]?.int == rows[0].bytes.count && single["objects"] == nil && one.count == 1, "\(single)")
        for d in one { d.close() }
    }

    @Test func aMissingObjectAmongGoodOnesFailsAloneAndIsCounted() throws {
        let origin = try Origin()
        let (daemon, rows) = try OpenTests.prefetched(origin)
        let errorsBefore = try daemon.call("status")["counters"]?["errors"]?.int ?? -1
        let missing = String(repeating: "0", count: 32)
        let (answer, descriptors) = try Self.exchange(daemon.socket, [("hashes", .array([.string(rows[1].hash), .string(missing), .string(rows[16].hash)]))])
        defer { for d in descriptors { d.close() } }
        #expect(answer["ok"] == .bool(true) && answer["opened"]?.int == 2, "\(answer)")
        let entries = answer["objects"]?.array ?? []
        #expect(entries.count == 3)
        #expect(entries.first?["size"]?.int == rows[1].bytes.count && entries.last?["size"]?.int == rows[16].bytes.count)
        #expect(entries.dropFirst().first?["hash"] == .string(missing) && entries.dropFirst().first?["size"] == nil)
        #expect(entries.dropFirst().first?["error"]?["code"] == .string("not_found"), "\(entries)")
        #expect(entries.dropFirst().first?["error"]?["message"]?.string?.contains(missing) == true, "the message names the object")
        try #require(descriptors.count == 2, "one descriptor per object opened, none for the missing one")
        #expect(try OpenTests.contents(descriptors[0]) == rows[1].bytes && OpenTests.contents(descriptors[1]) == rows[16].bytes)
        let errorsAfter = try daemon.call("status")["counters"]?["errors"]?.int ?? -1
        #expect(errorsAfter == errorsBefore + 1, "the object that failed counts as an error answer")
    }

    @Test func aCorruptObjectAmongGoodOnesIsQuarantinedAndRepairedOrFailsAlone() throws {
        let origin = try Origin()
        let (daemon, rows) = try OpenTests.prefetched(origin)
        // Row 3 (small) and row 16 (large) corrupt, their origin intact: repaired and served.
        // Row 5 corrupt and changed at the origin: not_found, with the reason.
        for row in [3, 5, 16] {
            let path = try #require(try daemon.call("get_image", [("row", num(row))])["image"]?["path"]?.string)
            try Data(rows[row].bytes.map { $0 ^ 0x5A }).write(to: URL(fileURLWithPath: path))
        }
        try origin.write("images/" + rows[5].url, bytes: Array("not the same bytes".utf8))
        let asked = [1, 3, 5, 16, 2].map { rows[$0] }
        let (answer, descriptors) = try Self.exchange(daemon.socket, [("hashes", .array(asked.map { .string($0.hash) }))])
        defer { for d in descriptors { d.close() } }
        let entries = answer["objects"]?.array ?? []
        #expect(answer["opened"]?.int == 4, "\(answer)")
        #expect(entries.map { $0["error"]?["code"] } == [nil, nil, .string("not_found"), nil, nil], "\(entries)")
        let reason = entries.count > 2 ? entries[2]["error"]?["message"]?.string ?? "" : ""
        #expect(reason.contains("did not give the same bytes"), "\(reason)")
        try #require(descriptors.count == 4)
        for (fd, object) in zip(descriptors, [asked[0], asked[1], asked[3], asked[4]]) {
            #expect(try OpenTests.contents(fd) == object.bytes, "the descriptor is of the verified (or downloaded again) bytes")
        }
        let quarantined = try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/quarantine")
        for row in [3, 5, 16] { #expect(quarantined.contains { $0.hasPrefix(rows[row].hash) }, "row \(row): \(quarantined)") }
    }

    @Test func aClientThatNeverReadsHoldsOneBatchAtMost() throws {
        let origin = try Origin()
        let (daemon, rows) = try OpenTests.prefetched(origin)
        #expect(try daemon.call("ping")["ok"] == .bool(true))
        let baseline = OpenTests.settledDescriptorCount(daemon.pid)
        // Round 0 opens small objects only (answered on the loop), round 1
        // the large one 64 times a batch (hashed on the workers: while a
        // batch is made, reading waits for it).
        for round in 0..<2 {
            let fd = try UnixSocket.connect(path: daemon.socket)
            var burst: [UInt8] = []
            for i in 0..<500 {
                let hashes = (0..<64).map { k in rows[round == 0 ? (i + k) % 16 : 16].hash }
                burst += Request.line(op: "open", [("hashes", .array(hashes.map { .string($0) }))])
            }
            let sent = DispatchSemaphore(value: 0)
            let request = burst
            Thread {
                _ = try? request.withBytes { (raw) throws(SystemError) in
                    var off = 0
                    while off < raw.count { off += try UnixSocket.send(fd, UnsafeRawBufferPointer(rebasing: raw[off...])) }
                }
                sent.signal()
            }.start()
            #expect(waitUntil(20) { OpenTests.descriptorCount(daemon.pid) >= baseline + 2 }, "round \(round): descriptors queued")
            // Whatever the kernel's socket buffer took, the daemon itself
            // holds the connection and at most one batch's descriptors
            // (reading pauses at 64 queued, and while a batch is made).
            let held = OpenTests.settledDescriptorCount(daemon.pid) - baseline
            #expect(held >= 2 && held <= 1 + Request.maxOpenObjects, "round \(round): \(held) descriptors held for one client that does not read")
            Glibc.shutdown(fd.rawValue, Int32(SHUT_RDWR))
            sent.wait()
            fd.close()
        }
        #expect(waitUntil(20) { OpenTests.descriptorCount(daemon.pid) == baseline },
                "descriptors left: \(OpenTests.descriptorCount(daemon.pid)) against \(baseline) at the start")
        #expect(try daemon.call("status")["counters"]?["connections"]?.int == 1, "only the status call's own")
    }

    @Test func aDaemonOutOfDescriptorsFailsTheObjectsItCannotOpenAndGoesOn() throws {
        let origin = try Origin()
        let (first, rows) = try OpenTests.prefetched(origin)
        first.stop()
        // The same store under an open-file limit below one batch: after the
        // daemon's own descriptors (store, log, sockets, the workers') it has
        // room for some of the 64, not all.
        let daemon = try Daemon(origin: origin, arguments: ["--max-connections", "8"], scratch: first.scratch,
                                launcher: ["/usr/bin/prlimit", "--nofile=64:64", "--"])
        let asked = (0..<64).map { rows[$0 % 16].hash }
        let (answer, descriptors) = try Self.exchange(daemon.socket, [("hashes", .array(asked.map { .string($0) }))])
        let entries = answer["objects"]?.array ?? []
        let opened = entries.filter { $0["size"] != nil }.count
        let failed = entries.filter { $0["error"] != nil }
        #expect(answer["ok"] == .bool(true) && entries.count == 64, "\(answer)")
        #expect(opened > 0 && !failed.isEmpty, "opened \(opened) of 64 under RLIMIT_NOFILE 64")
        #expect(opened + failed.count == 64 && answer["opened"]?.int == opened)
        #expect(descriptors.count == opened, "one descriptor per object opened")
        for f in failed {
            #expect(f["error"]?["code"] == .string("internal"), "\(f)")
            #expect(f["error"]?["message"]?.string?.contains("Too many open files") == true, "\(f)")
        }
        for (fd, entry) in zip(descriptors, entries.filter { $0["size"] != nil }) {
            let expected = rows.first { $0.hash == entry["hash"]?.string }?.bytes
            #expect(try OpenTests.contents(fd) == expected)
            fd.close()
        }
        // Nothing was taken for corrupt, and with the descriptors closed the daemon goes on whole.
        #expect(try daemon.call("status")["counters"]?["quarantined"]?.int == 0)
        let (again, passed) = try Self.exchange(daemon.socket, [("hashes", .array(rows.prefix(4).map { .string($0.hash) }))])
        #expect(again["opened"]?.int == 4 && passed.count == 4, "\(again)")
        for d in passed { d.close() }
        #expect(try daemon.call("ping")["ok"] == .bool(true))
    }
}
