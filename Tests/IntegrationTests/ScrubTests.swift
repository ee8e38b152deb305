import Foundation
import Testing
import CacheProtocol

/// docs/operations.md, "Scrub": the background re-hash of every object finds
/// what no request reads, resumes across a `kill -9`, and does nothing at
/// scrub-interval 0. The scratch directories are on this machine's own file
/// system (ext4 or overlay): no checksums of its own, whatever verify-reads says.
@Suite struct ScrubTests {
    /// Changes one byte of `path` in place, through the file system: same
    /// file, same size, other bytes (only a hash tells).
    static func flipByte(_ path: String, at offset: UInt64 = 20) throws {
        let file = try #require(FileHandle(forUpdatingAtPath: path))
        defer { try? file.close() }
        try file.seek(toOffset: offset)
        let byte = try #require(try file.read(upToCount: 1)?.first)
        try file.seek(toOffset: offset)
        try file.write(contentsOf: [byte ^ 0x01])
    }

    static func scrub(_ daemon: Daemon) throws -> JSON {
        try #require(try daemon.call("status")["scrub"])
    }

    /// An object no request reads is changed on disk; the scrub (a pass a
    /// second, at a rate that never waits) finds it, quarantines it, counts
    /// it and downloads it again, in either verify-reads mode.
    @Test(arguments: ["always", "on-change"])
    func findsRotNoReadMeetsAndDownloadsItAgain(_ mode: String) throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin, arguments: ["--verify-reads", mode, "--scrub-interval", "1", "--scrub-rate", "1G"])
        let (image, path) = try daemon.prefetchedImage(row: 3)
        let hash = try #require(image["hash"]?.string)
        let url = try #require(image["url"]?.string)
        let originPath = String(url.dropFirst(origin.base.count))
        let good = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(try origin.count(originPath) == 1)
        let hits = try daemon.call("status")["counters"]?["hits"]?.int
        try Self.flipByte(path)

        #expect(waitUntil(15) { (try? Self.scrub(daemon)["since_start"]?["corrupt"]?.int) == 1 }, "\(daemon.log)")
        let quarantined = try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/quarantine")
        #expect(quarantined.count == 1 && quarantined[0].hasPrefix(hash), "\(quarantined)")
        #expect(try daemon.call("status")["counters"]?["quarantined"]?.int == 1)
        #expect(waitUntil(10) { (try? origin.count(originPath)) == 2 }, "downloaded again: \(String(describing: try? origin.counts()))")
        #expect(waitUntil(10) { (try? Data(contentsOf: URL(fileURLWithPath: path))) == good }, "the good bytes are back")
        #expect(waitUntil(10) { daemon.log.contains("scrub: object \(hash), found corrupt, was downloaded again") }, "\(daemon.log)")
        // Nothing read it meanwhile: the scrub's checks are no hits.
        #expect(try daemon.call("status")["counters"]?["hits"]?.int == hits)

        // A pass that found it ended; cachectl and /metrics say so.
        #expect(waitUntil(10) { (try? Self.scrub(daemon)["last"]?["checked"]?["objects"]?.int).map { $0 >= 14 } == true })
        let status = try cachectl(["status"], socket: daemon.socket)
        #expect(status.stdout.contains("\nscrub: last pass ended "), "\(status.stdout)")
        let metrics = try cachectl(["metrics"], socket: daemon.socket).stdout
        #expect(metrics.contains("cached_scrub_findings_total{kind=\"corrupt\"} 1\n"), "\(metrics)")
        #expect(metrics.contains("cached_scrub_last_end_timestamp_seconds "), "\(metrics)")
        #expect(metrics.contains("cached_scrub_objects_checked_total "), "\(metrics)")
    }

    /// `pass STARTED POSITION OBJECTS ...` of scrub.state, if it has one.
    static func savedPass(_ store: String) -> (started: Int, position: String, objects: Int)? {
        guard let text = try? String(contentsOfFile: store + "/scrub.state", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("pass ") {
            let w = line.split(separator: " ")
            guard w.count == 8, w[2] != "-", let started = Int(w[1]), let objects = Int(w[3]) else { return nil }
            return (started, String(w[2]), objects)
        }
        return nil
    }

    /// A pass killed with `kill -9` part-way resumes after the restart from
    /// the position it saved, rather than starting over. The scrub is turned
    /// on by a reload (SIGHUP), at a rate that makes the pass last seconds.
    @Test func aPassKilledPartWayResumesFromItsPosition() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let conf = scratch.path + "/cached.conf"
        func configure(_ text: String) throws {
            try text.write(toFile: conf, atomically: false, encoding: .utf8)
            #expect(chmod(conf, 0o644) == 0)
        }
        try configure("scrub-interval = 0\n")
        var daemon = try Daemon(origin: origin, arguments: ["--config", conf], scratch: scratch)
        _ = try daemon.call("prefetch", [("what", .string("images"))])
        let objects = try daemon.call("status")["objects"]?.int ?? 0
        let bytes = try daemon.call("status")["bytes"]?.int ?? 0
        #expect(objects == 15)
        #expect(try Self.scrub(daemon)["state"]?.string == "off")

        let rate = 8 << 10
        try configure("scrub-interval = 600\nscrub-rate = 8K\n")
        kill(daemon.pid, SIGHUP)
        #expect(waitUntil(5) { daemon.log.contains("scrub-interval 0 -> 600, scrub-rate 8388608 -> \(rate)") }, "\(daemon.log)")
        // Never scrubbed: the first pass starts min(interval, 10 min) after the
        // start. The scrub thread takes the reload when it wakes, a moment
        // after the log line: its next start is awaited, not read once.
        var waiting: JSON = .null
        let scheduled = waitUntil(5) {
            waiting = (try? Self.scrub(daemon)) ?? .null
            return waiting["state"]?.string == "idle" && waiting["next_start"]?.int ?? 0 > 0
        }
        #expect(scheduled, "\(waiting)")
        try configure("scrub-interval = 2\nscrub-rate = 8K\n")
        kill(daemon.pid, SIGHUP)
        var saved: (started: Int, position: String, objects: Int)?
        #expect(waitUntil(15) { saved = Self.savedPass(daemon.store); return saved != nil }, "\(daemon.log)")
        daemon.kill9()
        saved = Self.savedPass(daemon.store)
        let before = try #require(saved, "scrub.state names the pass's position")
        #expect(before.objects >= 1 && before.objects < objects)

        daemon = try Daemon(origin: origin, arguments: ["--config", conf], scratch: scratch)
        // Read at start: the first status shows the pass it left.
        let resumed = try Self.scrub(daemon)["pass"]
        #expect(resumed?["started"]?.int == before.started, "the same pass: \(String(describing: resumed))")
        #expect((resumed?["checked"]?["objects"]?.int ?? 0) >= before.objects)
        #expect(waitUntil(5) { daemon.log.contains("scrub: resuming the pass started ") && daemon.log.contains("after object \(before.position)") },
                "\(daemon.log)")
        #expect(waitUntil(20) { (try? Self.scrub(daemon)["last"]?["started"]?.int) == before.started }, "\(daemon.log)")
        let scrub = try Self.scrub(daemon)
        let last = try #require(scrub["last"])
        #expect(last["checked"]?["objects"]?.int == objects, "every object counted once across the kill: \(last)")
        // This process hashed only what was left after the saved position
        // (and what the next pass, under way already, has checked).
        let next = scrub["pass"]?["checked"]?["objects"]?.int ?? 0
        #expect(scrub["since_start"]?["objects"]?.int == objects - before.objects + next, "\(scrub)")
        // Paced: the bytes of all but the largest object took their time at 8 KiB/s (halved: a wide bound).
        let took = (last["ended"]?.int ?? 0) - (last["started"]?.int ?? 0)
        #expect(took + 1 >= (bytes - 10_518) / rate / 2, "\(last)")
    }

    /// SIGTERM mid-pass, while the pacing holds the scrub back for seconds:
    /// the daemon stops at once, the position saved where the pass was.
    @Test func aStopMidPassIsPromptAndSavesThePosition() throws {
        let origin = try Origin()
        let scratch = Scratch()
        var daemon = try Daemon(origin: origin, arguments: ["--scrub-interval", "0"], scratch: scratch)
        _ = try daemon.call("prefetch", [("what", .string("images"))])
        daemon.stop()
        // 1 KiB/s: each object holds the next back for as many seconds as it has KiB.
        daemon = try Daemon(origin: origin, arguments: ["--scrub-interval", "1", "--scrub-rate", "1K"], scratch: scratch)
        #expect(waitUntil(10) { (try? Self.scrub(daemon)["pass"]?["checked"]?["objects"]?.int).map { $0 >= 1 } == true }, "\(daemon.log)")
        let checked = try Self.scrub(daemon)["pass"]?["checked"]?["objects"]?.int ?? 0
        let begun = Date()
        #expect(daemon.stop() == 0)
        #expect(Date().timeIntervalSince(begun) < 5, "the stop waited for no pacing")
        #expect(!daemon.log.contains("still hashing an object at exit"), "\(daemon.log)")
        #expect(!daemon.log.contains("workers still busy"), "\(daemon.log)")
        let saved = try #require(Self.savedPass(daemon.store), "the position was saved at the stop")
        #expect(saved.objects >= checked && saved.objects < 15)
        #expect(daemon.log.contains("scrub: pass stopped at \(saved.objects) of 15 objects, its position saved; it resumes there at the next start"),
                "the stop is logged with how far it got: \(daemon.log)")
    }

    /// A damaged scrub.state is no error: a warning, and a new pass at once
    /// (not ten minutes after the start), which replaces it.
    @Test func aDamagedStateFileStartsANewPassWithAWarning() throws {
        let origin = try Origin()
        let scratch = Scratch()
        var daemon = try Daemon(origin: origin, arguments: ["--scrub-interval", "0"], scratch: scratch)
        _ = try daemon.call("prefetch", [("what", .string("images"))])
        daemon.stop()
        let file = daemon.store + "/scrub.state"
        try "cached scrub state 1\npass 5 - 1 2 3 4 5\ncheck 00\n".write(toFile: file, atomically: false, encoding: .utf8)
        daemon = try Daemon(origin: origin, arguments: ["--scrub-interval", "600", "--scrub-rate", "1G"], scratch: scratch)
        #expect(daemon.log.contains("warning: scrub: \(daemon.store)/scrub.state: it has no check line; it is replaced, and a new pass starts"),
                "\(daemon.log)")
        #expect(waitUntil(10) { (try? Self.scrub(daemon)["last"]?["checked"]?["objects"]?.int) == 15 }, "\(daemon.log)")
        // Saved just after the status shows it.
        #expect(waitUntil(5) { (try? String(contentsOfFile: file, encoding: .utf8))?.hasPrefix("cached scrub state 1\nlast ") == true })
        #expect(waitUntil(5) { ((try? Self.scrub(daemon)["next_start"]?.int) ?? nil ?? 0) > Int(Date().timeIntervalSince1970) + 500 },
                "the next a whole interval on: \(String(describing: try? Self.scrub(daemon)))")
    }

    /// scrub-interval 0: no pass, no state file, an object changed on disk
    /// stays unfound until read.
    @Test func anIntervalOfZeroRunsNoScrub() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin, arguments: ["--scrub-interval", "0", "--scrub-rate", "1G"])
        let (_, path) = try daemon.prefetchedImage(row: 3)
        try Self.flipByte(path)
        usleep(2_500_000)  // A second-long interval finds it well within this (the test above).
        let scrub = try Self.scrub(daemon)
        #expect(scrub["state"]?.string == "off" && scrub["pass"] == .null && scrub["last"] == .null && scrub["next_start"] == .null, "\(scrub)")
        #expect(scrub["since_start"]?["objects"]?.int == 0)
        #expect(try daemon.call("status")["counters"]?["quarantined"]?.int == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.store + "/quarantine").isEmpty)
        #expect(!FileManager.default.fileExists(atPath: daemon.store + "/scrub.state"))
        #expect(!daemon.log.contains("scrub: pass"), "\(daemon.log)")
        let status = try cachectl(["status"], socket: daemon.socket)
        #expect(status.stdout.contains("\nscrub: no pass ended yet; off (scrub-interval 0)"), "\(status.stdout)")
    }
}
