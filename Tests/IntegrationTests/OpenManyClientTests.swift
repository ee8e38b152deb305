import Foundation
import Testing
import CacheProtocol
import CacheSystem
import CachedClient

/// `open` of many objects through cachectl (`get objects`) and the Swift
/// library (`openObjects(hashes:)`), against the real daemon.
@Suite struct OpenManyClientTests {
    @Test func cachectlWritesEachObjectAndNamesTheOnesThatFailed() throws {
        let origin = try Origin()
        let (daemon, rows) = try OpenTests.prefetched(origin)
        let dir = daemon.scratch.path + "/objects-out"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        var r = try cachectl(["get", "objects", rows[2].hash, rows[16].hash, "-o", dir], socket: daemon.socket)
        #expect(r.status == 0, "\(r.stderr)")
        for row in [2, 16] {
            #expect(Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/" + rows[row].hash))) == rows[row].bytes, "row \(row)")
        }
        // Without -o: each hash and size, in order; more than one request's worth.
        let many = (0..<70).map { rows[$0 % rows.count].hash }
        r = try cachectl(["get", "objects"] + many, socket: daemon.socket)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines == (0..<70).map { "\(rows[$0 % rows.count].hash)  \(rows[$0 % rows.count].bytes.count)" })
        // A missing object among good ones: the good ones still printed, the
        // missing one named on stderr, exit 4; never a silent success.
        let missing = String(repeating: "0", count: 32)
        r = try cachectl(["get", "objects", rows[1].hash, missing, rows[3].hash], socket: daemon.socket)
        #expect(r.status == 4, "\(r.stderr)")
        #expect(r.stdout == "\(rows[1].hash)  \(rows[1].bytes.count)\n\(rows[3].hash)  \(rows[3].bytes.count)\n")
        #expect(r.stderr.contains("cachectl: \(missing): ") && r.stderr.contains("(not_found)"), "\(r.stderr)")
        #expect(r.stderr.contains("1 of 3 objects could not be opened"), "\(r.stderr)")
        r = try cachectl(["--json", "get", "objects", missing], socket: daemon.socket)
        #expect(r.status == 4)
        #expect(try JSONParser.parse(Array(r.stdout.utf8))["error"]?["code"] == .string("not_found"), "\(r.stdout)")
        // -o - : the bytes one after another.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Paths.cachectl)
        p.arguments = ["--socket", daemon.socket, "get", "objects", rows[4].hash, rows[16].hash, rows[4].hash, "-o", "-"]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(Array(data) == rows[4].bytes + rows[16].bytes + rows[4].bytes)
        // Usage errors, before anything is asked.
        r = try cachectl(["get", "objects"], socket: daemon.socket)
        #expect(r.status == 2 && r.stderr.contains("at least one HASH"), "\(r.stderr)")
        r = try cachectl(["get", "objects", rows[1].hash, "XYZ"], socket: daemon.socket)
        #expect(r.status == 2 && r.stderr.contains("not an object's hash: \"XYZ\""), "\(r.stderr)")
        r = try cachectl(["get", "objects", rows[1].hash, "-o", dir + "/" + rows[2].hash], socket: daemon.socket)
        #expect(r.status == 2 && r.stderr.contains("takes a directory"), "\(r.stderr)")
    }

    @Test func theSwiftLibraryGivesEachObjectItsOwnOutcome() async throws {
        let origin = try Origin()
        let (daemon, rows) = try OpenTests.prefetched(origin)
        let cached = CachedClient(socketPath: daemon.socket)
        let missing = String(repeating: "0", count: 32)
        // 70 hashes: two requests; the missing one in the second.
        let asked = (0..<69).map { rows[$0 % rows.count].hash } + [missing]
        let results = try await cached.openObjects(hashes: asked)
        #expect(results.count == asked.count)
        for (i, result) in results.enumerated() {
            switch result {
            case .success(let file):
                defer { file.close() }
                let expected = rows[i % rows.count].bytes
                #expect(i < 69 && file.hash == asked[i] && file.size == Int64(expected.count), "entry \(i)")
                var buffer = [UInt8](repeating: 0, count: expected.count)
                #expect(pread(file.descriptor, &buffer, buffer.count, 0) == expected.count && buffer == expected, "entry \(i)")
            case .failure(let error):
                #expect(i == 69 && error.code == .daemon(.notFound) && error.message.contains(missing), "entry \(i): \(error)")
            }
        }
        #expect(try await cached.openObjects(hashes: []).isEmpty)
        // A malformed hash in the second request: the whole call throws the daemon's refusal.
        do {
            let opened = try await cached.openObjects(hashes: Array(asked.prefix(64)) + ["NOT-A-HASH"])
            Issue.record("a malformed hash was not refused: \(opened.count) outcomes")
        } catch {
            #expect(error.code == .daemon(.badRequest) && error.message.contains(#""hashes"[0]"#), "\(error)")
        }
        #expect(try await cached.ping().protocolVersion == 1)
    }
}
