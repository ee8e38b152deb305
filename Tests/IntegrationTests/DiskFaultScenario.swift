import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// A daemon with its store on a fresh btrfs loop device, an origin serving a
/// small (100 KiB, read inline) and a large (2 MiB, read on a worker) image,
/// both prefetched, the HTTP front-end on a loopback port, and a ping on
/// another connection all along. Counts the rots it injected per row: each
/// is one read error the daemon must meet, count, log and repair.
final class FaultScenario {
    static let deadline = 20.0
    let mode: VerifyReads
    let loop: BtrfsLoop
    let origin: Origin
    let daemon: Daemon
    let port: Int
    let pinger: Pinger
    private(set) var images: [FaultImage]
    /// The rot each row's object holds now, and how many were injected.
    private(set) var rots: [Int: Rot] = [:]
    private(set) var injected: [Int: Int] = [:]
    /// Rows a request was sent for since a rot: the rots counted after.
    private(set) var asked: Set<Int> = []
    /// A request hung: later ones are not sent (the first is recorded).
    private(set) var stalled = false

    init(_ mode: VerifyReads) throws {
        self.mode = mode
        loop = try BtrfsLoop()
        let served = [FaultImage.png(row: 0, name: "small.png", size: 100 << 10), FaultImage.png(row: 1, name: "large.png", size: (2 << 20) + 4321)]
        origin = try Self.origin(serving: served)
        port = try unusedLocalPort()
        let store = loop.mountPoint + "/store"
        guard mkdir(store, 0o700) == 0 else { throw HarnessError("mkdir \(store): \(String(cString: strerror(errno)))") }
        daemon = try Daemon(origin: origin, arguments: ["--store", store, "--verify-reads", mode.rawValue, "--http-listen", "127.0.0.1:\(port)"])
        pinger = Pinger(socket: daemon.socket)
        images = try Self.prefetch(served, daemon)
    }

    deinit {
        _ = pinger.stop()
        if daemon.isRunning { daemon.kill9() }
    }

    private static func origin(serving images: [FaultImage]) throws -> Origin {
        let origin = try Origin()
        for image in images { try origin.write("images/" + image.name, bytes: image.bytes) }
        let manifest = images.map { JSON.object([("url", .string($0.name)), ("description", .string($0.name))]) }
        try origin.write("images/manifest.json", bytes: JSON.array(manifest).encoded)
        return origin
    }

    /// Prefetches every image; each with its hash and object path.
    private static func prefetch(_ images: [FaultImage], _ daemon: Daemon) throws -> [FaultImage] {
        let r = try call(daemon.socket, "prefetch", [("what", .string("images"))])
        guard r["images"]?["downloaded"]?.int == images.count else { throw HarnessError("the prefetch did not download every image: \(text(r))") }
        return try images.map { image in
            var image = image
            let answer = try call(daemon.socket, "get_image", [("row", num(image.row))])
            guard let hash = answer["image"]?["hash"]?.string, let path = answer["image"]?["path"]?.string,
                  let objects = path.range(of: "objects/") else { throw HarnessError("row \(image.row) is not cached: \(text(answer))") }
            image.hash = hash
            image.objectPath = String(path[objects.lowerBound...])
            return image
        }
    }
}

extension FaultScenario {
    /// A connection whose every wait, and the whole answer, end within the deadline.
    static func client(_ socket: String) throws -> Client {
        let client = try Client(socketPath: socket, timeout: .answer(.seconds(deadline)))
        client.deadline = Deadline(after: .seconds(deadline))
        return client
    }

    /// One request on a fresh connection, answered within the deadline or thrown.
    static func call(_ socket: String, _ op: String, _ fields: [(String, JSON)] = []) throws -> JSON {
        try client(socket).call(op, fields)
    }

    func call(_ op: String, _ fields: [(String, JSON)] = []) throws -> JSON { try Self.call(daemon.socket, op, fields) }

    /// Rots the file the row's object is in now.
    func rot(_ row: Int) throws {
        let answer = try call("get_image", [("row", num(row))])
        guard let path = answer["image"]?["path"]?.string else { throw HarnessError("row \(row) is not cached: \(text(answer))") }
        rots[row] = try loop.rot(file: path)
        injected[row, default: 0] += 1
    }

    /// Rots the row's object again unless it still holds its last rot (the
    /// daemon never met it, or never replaced the file).
    func ensureRotted(_ row: Int) throws {
        guard !stalled else { return }
        if let rot = rots[row], loop.stillRotted(rot) { return }
        try rot(row)
    }

    /// Records an issue unless `delivery` is acceptable for `ask` in this mode.
    func expect(_ delivery: Delivery, _ ask: Delivery.Ask, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        if case .notTried = delivery { return }
        #expect(delivery.isAcceptable(for: ask, mode), "\(what), --verify-reads \(mode.rawValue): \(delivery)", sourceLocation: sourceLocation)
    }

    /// Runs a request for `row` unless an earlier one hung; a timeout stalls the test.
    func bounded(_ row: Int, _ request: () throws -> Delivery) -> Delivery {
        guard !stalled else { return .notTried }
        asked.insert(row)
        let delivery: Delivery
        do { delivery = try request() } catch let error as ClientError {
            switch error {
            case .timedOut: delivery = .timedOut("\(error)")
            case .closed: delivery = .closed("before the answer line")
            default: delivery = .failed("\(error)")
            }
        } catch { delivery = .failed("\(error)") }
        if case .timedOut = delivery { stalled = true }
        return delivery
    }

    /// `verify`, within the deadline; nil (recorded) when it is not answered.
    func verify(sourceLocation: SourceLocation = #_sourceLocation) -> JSON? {
        guard !stalled else { return nil }
        asked.formUnion(images.map(\.row))
        do { return try call("verify") } catch {
            if case ClientError.timedOut = error { stalled = true }
            Issue.record("verify, --verify-reads \(mode.rawValue): \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }
}

extension FaultScenario {
    /// Socket `read`: the answer line, then `size` bytes, each compared.
    func read(_ image: FaultImage) -> Delivery {
        bounded(image.row) {
            let client = try Self.client(daemon.socket)
            let answer = try client.call("read", [("hash", .string(image.hash))])
            guard answer["ok"] == .bool(true) else { return .refused(text(answer)) }
            guard answer["size"]?.int == image.bytes.count else { return .wrong("size \(text(answer)), not \(image.bytes.count)") }
            var check = ByteCheck(image.bytes[...])
            do { try client.readBytes(image.bytes.count) { check.take($0) } } catch let error as ClientError {
                if case .timedOut = error { return .timedOut("\(check.received) of \(image.bytes.count) bytes came: \(error)") }
            }
            return check.delivery
        }
    }

    /// Socket `open`: the passed descriptor read from offset 0 with pread.
    func open(_ image: FaultImage) -> Delivery {
        bounded(image.row) {
            let answer = try Self.client(daemon.socket).open(hash: image.hash)
            guard case let .file(fd, size, _) = answer else { return .refused(text(answer.answer)) }
            defer { fd.close() }
            guard size == Int64(image.bytes.count) else { return .wrong("size \(size), not \(image.bytes.count)") }
            return Self.readAll(fd, expecting: image.bytes)
        }
    }

    private static func readAll(_ fd: FileDescriptor, expecting bytes: [UInt8]) -> Delivery {
        var check = ByteCheck(bytes[...])
        var buffer = [UInt8](repeating: 0, count: 128 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd.rawValue, $0.baseAddress, $0.count, off_t(check.received)) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return check.firstWrong == nil ? .readError(errno: errno, at: check.received) : check.delivery }
            if n == 0 { return check.delivery }
            check.take(buffer[0..<n])
        }
    }

    /// The row's two HTTP routes to its bytes.
    func targets(_ image: FaultImage) -> [String] { ["/images/\(image.row)", "/objects/\(image.hash)"] }

    /// An HTTP GET of `target`, whole (200) or of `range` (206).
    func get(_ target: String, _ image: FaultImage, range: Range<Int>? = nil) -> Delivery {
        bounded(image.row) {
            guard let range else { return try DeadlineHTTP.get(port: port, target, expecting: image.bytes[...]) }
            let contentRange = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(image.bytes.count)"
            return try DeadlineHTTP.get(port: port, target, headers: ["Range: bytes=\(range.lowerBound)-\(range.upperBound - 1)"],
                                        expecting: image.bytes[range], status: 206, contentRange: contentRange)
        }
    }
}

extension FaultScenario {
    /// After the faults: `status` counts them and says the mode, `/metrics`
    /// counts them, the origin served each rotted image again, the log names
    /// each object's file and the errno (once per rot, not per retry), the
    /// ping never went unanswered and the daemon is still running.
    func expectFaultsHandled(sourceLocation: SourceLocation = #_sourceLocation) throws {
        guard daemon.isRunning else {
            let status = daemon.waitForExit()
            Issue.record("the daemon died (exit status or signal \(status)): \(daemon.log.suffix(3000))", sourceLocation: sourceLocation)
            return
        }
        let total = injected.filter { asked.contains($0.key) }.values.reduce(0, +)
        let status = try call("status")
        #expect(status["verify_reads"] == .string(mode.rawValue), "status: \(text(status))", sourceLocation: sourceLocation)
        let counters = status["counters"]
        #expect((counters?["quarantined"]?.int ?? -1) >= total, "\(total) rots: \(text(counters ?? .null))", sourceLocation: sourceLocation)
        #expect((counters?["read_errors"]?.int ?? -1) >= total, "\(total) rots: \(text(counters ?? .null))", sourceLocation: sourceLocation)
        let metrics = try DeadlineHTTP.text(port: port, "/metrics")
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("cached_read_errors_total ") }
        #expect(line.flatMap { Int($0.split(separator: " ")[1]) } ?? -1 >= total, "/metrics: \(line ?? "no cached_read_errors_total")",
                sourceLocation: sourceLocation)
        for image in images { try expectRepaired(image, sourceLocation: sourceLocation) }
        let pings = pinger.stop()
        #expect(pings.answered > 0 && pings.failures.isEmpty, "ping on another connection: \(pings.failures)", sourceLocation: sourceLocation)
        #expect(daemon.isRunning, "the daemon is still running: \(daemon.log.suffix(2000))", sourceLocation: sourceLocation)
    }

    private func expectRepaired(_ image: FaultImage, sourceLocation: SourceLocation) throws {
        let rots = injected[image.row] ?? 0
        guard rots > 0, asked.contains(image.row) else { return }
        let downloads = try origin.count("/images/" + image.name)
        #expect(downloads >= 1 + rots, "\(image.name): \(rots) rots, \(downloads) downloads", sourceLocation: sourceLocation)
        let lines = daemon.log.split(separator: "\n").filter {
            $0.contains(image.objectPath) && ($0.contains("EIO") || $0.contains("Input/output error"))
        }
        #expect(!lines.isEmpty && lines.count <= rots, "\(image.name) (\(image.objectPath)): \(rots) rots, lines naming it and EIO: \(lines)",
                sourceLocation: sourceLocation)
    }
}

