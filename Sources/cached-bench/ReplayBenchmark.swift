#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CacheStore
import CacheSystem
import Foundation

/// `cached-bench replay N [--daemon PATH]`: writes an index log of about N
/// records (rows, each with its object mapping and use time, in transactions
/// of 64 rows), then measures replay: in process (time and resident memory of
/// opening the store) and, with --daemon, the real binary's start to its
/// first answered ping and its resident memory.
enum ReplayBenchmark {
    /// VmRSS of `pid`; 0, said on stderr, when /proc cannot tell (the
    /// process ended): a figure of 0 is then explained.
    static func rssBytes(pid: Int32 = getpid()) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
            FileHandle.standardError.write(Data("cached-bench: /proc/\(pid)/status could not be read: resident size shown as 0\n".utf8))
            return 0
        }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
        }
        return 0
    }

    static func seconds(since start: UInt64) -> Double { Clock.elapsed(since: start).inSeconds }

    /// The process's CPU time so far, user and system (`getrusage`).
    static func cpuSeconds(_ who: Int32 = RUSAGE_SELF.rawValue) -> Double {
        var usage = rusage()
        guard getrusage(__rusage_who_t(who), &usage) == 0 else { return 0 }
        func s(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return s(usage.ru_utime) + s(usage.ru_stime)
    }

    /// Writes the log and fsyncs it before anything is timed: a daemon's
    /// log was written back long before it restarts, and without the fsync
    /// the kernel would still be writing back a 10,000,000-record log
    /// (300 MB) during its replay, a 1,000,000-record one's far less.
    static func writeSynced(_ bytes: [UInt8], to path: String) throws {
        let fd = try FileDescriptor.open(path, [.writeOnly, .create, .truncate])
        defer { fd.close() }
        try fd.writeAll(bytes)
        try fd.sync()
    }

    // A script of steps (write a log, replay it, start the daemon, measure),
    // read top to bottom like the figures it prints.
    static func replay(records: Int, posts: Bool = false, transaction: Int = 64, daemon: String?, keep: Bool) throws {
        var template = Array("/tmp/cached-bench-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        defer {
            if !keep {
                do { try FileManager.default.removeItem(atPath: dir) } catch { FileHandle.standardError.write(Data("cached-bench: \(dir) left behind: \(error)\n".utf8)) }
            }
        }
        let store = dir + "/store"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)

        var (bytes, written, what) = posts ? postsLog(count: records, perTransaction: transaction) : rowsLog(records: records)
        try writeSynced(bytes, to: store + "/index.log")
        print("log: \(written) records (\(what)), \(formatSize(Int64(bytes.count)))")
        bytes = []
        // The log's buffer is freed, and glibc would keep a small one's pages
        // (a 1,000,000-record log's 30 MB) for the replay to reuse, where a
        // large one's (300 MB, mapped on its own) goes back to the kernel: the
        // small replay would skip the page faults the large one and a freshly
        // started daemon both pay. Both now start from a heap given back.
        Memory.returnFreePages()

        // In process: open (replay) and measure.
        let rssBefore = rssBytes()
        let cpuBefore = cpuSeconds()
        let threadCPUBefore = cpuSeconds(1) // RUSAGE_THREAD: this thread, which replays
        let start = Clock.monotonicNanoseconds()
        let s = try Store(StoreConfiguration(directory: store))
        let replaySeconds = seconds(since: start)
        let replayCPU = cpuSeconds() - cpuBefore
        let replayThreadCPU = cpuSeconds(1) - threadCPUBefore
        let rssAfter = rssBytes()
        let stats = s.stats()
        s.close()
        let perRecord = Double(rssAfter - rssBefore) / Double(written)
        print(String(format: "in-process replay: %.3f s, %.0f records/s, resident +%@ = %.0f bytes/record (%d rows cached, %d posts)",
                     replaySeconds, Double(written) / replaySeconds, formatSize(Int64(rssAfter - rssBefore)), perRecord, stats.rowsCached, stats.posts))
        // On a shared machine the wall time also holds the other tenants'
        // turns on the CPU; the CPU time is the replay's own work.
        print(String(format: "in-process CPU: %.3f s (user and system), %.3f s of it on the replaying thread", replayCPU, replayThreadCPU))

        guard let daemon else { return }
        let socket = dir + "/sock"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: daemon)
        p.arguments = ["--store", store, "--socket", socket, "--log-level", "info"]
        // The daemon's log, for its own figure of the replay ("store opened:
        // the log replayed in N ms"), which leaves out the process's start.
        let logPath = dir + "/daemon.log"
        guard FileManager.default.createFile(atPath: logPath, contents: nil),
              let logFile = FileHandle(forWritingAtPath: logPath) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: logPath])
        }
        defer { try? logFile.close() }
        p.standardError = logFile
        let launched = Clock.monotonicNanoseconds()
        try p.run()
        var ready: Double = -1
        while p.isRunning && seconds(since: launched) < 60 {
            // Refused or not yet there while the daemon starts: asked again in 2 ms.
            if let c = try? Client(socketPath: socket), (try? c.call("ping"))?["ok"] == .bool(true) {
                ready = seconds(since: launched)
                break
            }
            usleep(2000)
        }
        let rss = rssBytes(pid: p.processIdentifier)
        p.terminate()
        p.waitUntilExit()
        print(String(format: "daemon: first ping answered %.3f s after exec, resident %@ = %.0f bytes/record",
                     ready, formatSize(Int64(rss)), Double(rss) / Double(written)))
        print("daemon's own replay: " + daemonReplay(log: logPath))
    }

    /// A log of about `records` records: rows of three records each (row,
    /// rowObject, access), in transactions of 64 rows, and the manifest's size.
    static func rowsLog(records: Int) -> (bytes: [UInt8], records: Int, what: String) {
        let rows = max(1, records / 3)
        var bytes = RecordCodec.fileHeader
        bytes.reserveCapacity(rows * 110)
        var written = 0
        let now = Clock.wallMilliseconds()
        for r in 0..<rows {
            let hash = Hash128(high: UInt64(r) &* 0x9E37_79B9_7F4A_7C15, low: UInt64(r))
            RecordCodec.encode(.row(row: r, url: "images/\(r).jpg", description: nil), into: &bytes)
            RecordCodec.encode(.rowObject(row: r, hash: hash, size: Int64(50_000 + r % 1000), type: .jpeg), into: &bytes)
            RecordCodec.encode(.access(hash: hash, time: now - Int64(r)), into: &bytes)
            written += 3
            if r % 64 == 63 || r == rows - 1 {
                RecordCodec.encode(.commit, into: &bytes)
                written += 1
            }
        }
        RecordCodec.encode(.manifestSize(count: rows), into: &bytes)
        RecordCodec.encode(.commit, into: &bytes)
        return (bytes, written + 2, "\(rows) rows")
    }

    /// A log of `count` posts as a compacted log holds them (transactions
    /// of 64), or as a refresh wrote them (`perTransaction` = `count`: one),
    /// each shaped like jsonplaceholder's (about 280 bytes, as
    /// scripts/benchlib.py's `post_json`): what a restart with a million
    /// posts replays (issue 34, point 7).
    static func postsLog(count: Int, perTransaction: Int) -> (bytes: [UInt8], records: Int, what: String) {
        let words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do",
                     "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna", "aliqua", "enim"]
        var bytes = RecordCodec.fileHeader
        bytes.reserveCapacity(count * 300)
        var written = 0
        for i in 1...max(1, count) {
            let title = (1...6).map { words[(i * $0) % words.count] }.joined(separator: " ")
            let body = (1...4).map { j in (1...7).map { k in words[(i + k * j) % words.count] }.joined(separator: " ") }
                .joined(separator: "\\n")
            let json = "{\"userId\":\(i / 10 + 1),\"id\":\(i),\"title\":\"\(title)\",\"body\":\"\(body)\"}"
            RecordCodec.encode(.post(id: .int(Int64(i)), json: Array(json.utf8)), into: &bytes)
            written += 1
            if i % max(1, perTransaction) == 0 || i == max(1, count) {
                RecordCodec.encode(.commit, into: &bytes)
                written += 1
            }
        }
        return (bytes, written, "\(max(1, count)) posts, \(min(max(1, perTransaction), max(1, count))) a transaction")
    }

    /// The daemon's own figure of its replay, from its log: "the log
    /// replayed in N ms", or why it is not there.
    static func daemonReplay(log path: String) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "its log \(path) could not be read" }
        guard let line = text.split(separator: "\n").first(where: { $0.contains("the log replayed in ") }),
              let from = line.range(of: "the log replayed in ") else {
            return "its log does not say how long the replay took (no \"the log replayed in\" in \(path))"
        }
        return String(line[from.lowerBound...].prefix { $0 != "," })
    }
}
