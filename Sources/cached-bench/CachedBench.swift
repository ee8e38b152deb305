#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Benchmarks for cached (`make bench`, `make bench-store`). Not tests: they
/// print figures and assert nothing about time.
@main
struct CachedBench {
    static let usage = """
    usage: cached-bench replay RECORDS [--posts [--transaction N]] [--daemon PATH/TO/cached] [--keep]
           cached-bench load --socket PATH [--connections C] [--requests N] [--pipeline P] [--ids MAX] [--op get_post|ping] [--redis]
           cached-bench read-all --socket PATH [--rounds R] [--mode read|open|files] [--window W] [--batch N]
    """

    static func main() {
        let args = Array(CommandLine.arguments.dropFirst())
        func option(_ name: String) -> String? {
            args.firstIndex(of: name).flatMap { args.indices.contains($0 + 1) ? args[$0 + 1] : nil }
        }
        do {
            switch args.first {
            case "replay":
                guard args.count >= 2, let n = Int(args[1]) else { fail(usage) }
                try ReplayBenchmark.replay(records: n, posts: args.contains("--posts"), transaction: Int(option("--transaction") ?? "64") ?? 64,
                                           daemon: option("--daemon"), keep: args.contains("--keep"))
            case "load":
                guard let socket = option("--socket") else { fail(usage) }
                let result = try LoadGenerator(socket: socket, connections: Int(option("--connections") ?? "1") ?? 1,
                                               requests: Int(option("--requests") ?? "100000") ?? 100_000,
                                               pipeline: Int(option("--pipeline") ?? "1") ?? 1,
                                               maxID: Int(option("--ids") ?? "100") ?? 100,
                                               target: args.contains("--redis") ? .redis : .cached(op: option("--op") ?? "get_post")).run()
                print(result.json)
            case "read-all":
                guard let socket = option("--socket") else { fail(usage) }
                let rounds = Int(option("--rounds") ?? "1") ?? 1
                // read: the bytes over the socket; open: a descriptor per
                // object, read here; files: the object files read directly.
                let window = max(1, Int(option("--window") ?? "16") ?? 16)
                switch option("--mode") ?? "read" {
                case "read": try ReadAllBenchmark.run(socket: socket, rounds: rounds, window: window)
                case "open":
                    // --batch N: `open` of N objects a request, W requests in flight.
                    if let batch = option("--batch").flatMap({ Int($0) }), batch > 0 {
                        try ReadAllBenchmark.runOpenBatches(socket: socket, rounds: rounds, batch: batch, window: window)
                    } else {
                        try ReadAllBenchmark.runOpen(socket: socket, rounds: rounds, window: window)
                    }
                case "files": try ReadAllBenchmark.runFiles(socket: socket, rounds: rounds)
                default: fail(usage)
                }
            default:
                fail(usage)
            }
        } catch {
            fail("cached-bench: \(error)")
        }
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(2)
    }
}
