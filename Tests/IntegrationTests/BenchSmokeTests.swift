import Foundation
import Testing
import CacheProtocol

/// The benchmark tools, run briefly so they keep working (`make bench` runs
/// them at length). No figure is asserted: the machines are shared and noisy.
@Suite struct BenchSmokeTests {
    static func bench(_ args: [String]) throws -> (status: Int32, output: String) {
        try runProgram(Paths.binDir + "/cached-bench", args)
    }

    @Test(arguments: [(1, 1), (8, 1), (4, 16)])
    func theLoadGeneratorCompletesEveryRequestWithoutErrors(_ shape: (connections: Int, pipeline: Int)) throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("posts"))])
        let r = try Self.bench(["load", "--socket", daemon.socket, "--connections", String(shape.connections),
                                "--requests", "400", "--pipeline", String(shape.pipeline)])
        #expect(r.status == 0, "\(r.output)")
        let result = try JSONParser.parse(Array(r.output.utf8))
        #expect(result["requests"]?.int == 400)
        #expect(result["errors"]?.int == 0)
        #expect((result["ops"]?.double ?? 0) > 0)
        #expect(try daemon.call("status")["counters"]?["requests"]?.int ?? 0 >= 400)
    }

    @Test func readAllReceivesEveryObjectsBytes() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        _ = try daemon.call("prefetch", [("what", .string("images"))])
        let r = try Self.bench(["read-all", "--socket", daemon.socket, "--rounds", "3"])
        #expect(r.status == 0, "\(r.output)")
        let result = try JSONParser.parse(Array(r.output.utf8))
        let bytes = try daemon.call("status")["bytes"]?.int ?? -1
        #expect(result["objects"]?.int == 45)
        #expect(result["bytes"]?.int == 3 * bytes)
    }

    @Test func replayWritesAndReplaysALog() throws {
        let r = try Self.bench(["replay", "3000", "--daemon", Paths.cached])
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.contains("1000 rows cached"), "\(r.output)")
        #expect(r.output.contains("first ping answered"), "\(r.output)")
        // scripts/bench.py and bench-compare.py read the lines by these
        // prefixes: one line each, or they read the wrong one (they crashed).
        let lines = r.output.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("in-process replay:") }.count == 1 && lines.contains { $0.contains(" records/s") }, "\(r.output)")
        #expect(lines.filter { $0.hasPrefix("daemon:") }.count == 1, "\(r.output)")
        #expect(lines.contains { $0.hasPrefix("in-process CPU: ") }, "\(r.output)")
        #expect(lines.contains { $0.hasPrefix("daemon's own replay: the log replayed in ") }, "\(r.output)")
    }
}
