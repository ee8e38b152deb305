#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CacheProtocol
import CacheSystem
import Foundation

/// What a load run measured.
struct LoadResult {
    var requests: Int
    var seconds: Double
    var p50: Double  // microseconds
    var p99: Double
    var errors: Int
    /// Answer bytes received (payload and framing), to show both servers sent the same.
    var answerBytes: Int

    var opsPerSecond: Double { Double(requests) / seconds }
    var json: String {
        String(format: "{\"ops\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"requests\":%d,\"seconds\":%.3f,\"errors\":%d,\"answer_bytes\":%d}",
               opsPerSecond, p50, p99, requests, seconds, errors, answerBytes)
    }
}

/// The server a load run speaks to.
enum LoadTarget {
    /// cached: `{"op":"get_post","id":N}` (or `ping`), answered by a JSON line.
    case cached(op: String)
    /// Redis: `GET post:N`, the key holding exactly the line cached answers
    /// for that post (scripts/bench.py loads them), answered `$len\r\n...\r\n`.
    case redis

    func request(id: Int) -> [UInt8] {
        switch self {
        case .cached(let op) where op == "ping": return Array("{\"op\":\"ping\"}\n".utf8)
        case .cached: return Array("{\"op\":\"get_post\",\"id\":\(id)}\n".utf8)
        case .redis: return Array("GET post:\(id)\r\n".utf8)
        }
    }

    /// Reads one whole answer from a blocking socket: the bytes every later
    /// answer to the same request must equal.
    func readAnswer(_ fd: FileDescriptor) throws -> [UInt8] {
        var got: [UInt8] = []
        var byte: UInt8 = 0
        func next() throws -> UInt8 {
            let n = try withUnsafeMutableBytes(of: &byte) { (raw) throws(SystemError) in try UnixSocket.receive(fd, into: raw) ?? 0 }
            guard n == 1 else { throw SystemError("recv", "the server closed the connection while priming") }
            got.append(byte)
            return byte
        }
        while try next() != 0x0A {}
        guard case .redis = self else { return got }
        // `$len\r\n` then len bytes and `\r\n`; `$-1` (no such key) has no body.
        guard got.first == UInt8(ascii: "$"), let len = Int(String(decoding: got.dropFirst().dropLast(2), as: UTF8.self)) else {
            throw SystemError("GET", "Redis answered \(String(decoding: got, as: UTF8.self)): load the post:N keys first")
        }
        for _ in 0..<(len + 2) { _ = try next() }
        return got
    }
}

/// A single-threaded epoll client in the manner of redis-benchmark: C
/// connections, each with up to P requests in flight; the latency of a
/// request runs from its send to the last byte of its answer.
///
/// It does the same work per answer whatever the server: before the run it
/// asks each distinct request once and keeps the answer, and during the run
/// it compares every answer byte for byte with that one (a difference is an
/// error). So cached and Redis are measured by one client, on the same
/// connections, with the same payload bytes.
struct LoadGenerator {
    let socket: String
    let connections: Int
    let requests: Int
    let pipeline: Int
    let maxID: Int
    let target: LoadTarget

    private final class Conn {
        let fd: FileDescriptor
        /// Per request in flight: when it was sent and which line it was.
        var sentAt: [UInt64] = []
        var sentLine: [Int] = []
        var sentHead = 0
        var inFlight = 0
        var sent = 0
        /// How much of the head answer was received, and whether it differed so far.
        var matched = 0
        var differs = false
        init(fd: FileDescriptor) { self.fd = fd }
    }

    /// The distinct request lines (ids spread over 1...maxID) and their answers.
    private func prime() throws -> (lines: [[UInt8]], answers: [[UInt8]]) {
        let count = min(1024, maxID)
        let lines = (0..<count).map { target.request(id: ($0 * 7919) % maxID + 1) }
        let fd = try UnixSocket.connect(path: socket)
        defer { fd.close() }
        var answers: [[UInt8]] = []
        for line in lines {
            try line.withUnsafeBytes { raw throws in
                var off = 0
                while off < raw.count { off += try UnixSocket.send(fd, UnsafeRawBufferPointer(rebasing: raw[off...])) }
            }
            answers.append(try target.readAnswer(fd))
        }
        return (lines, answers)
    }

    // Long on purpose: a benchmark's hot loop, kept in one function so the
    // client costs as little per request as the clients it is compared with.
    func run() throws -> LoadResult {
        let (lines, answers) = try prime()
        let epfd = epoll_create1(0)
        defer { close(epfd) }
        var conns: [Conn] = []
        for i in 0..<connections {
            let fd = try UnixSocket.connect(path: socket)
            try fd.setNonBlocking()
            conns.append(Conn(fd: fd))
            _ = clinux_epoll_add(epfd, fd.rawValue, EPOLLIN.rawValue, UInt64(i))
        }
        defer { for c in conns { c.fd.close() } }
        let perConn = (requests + connections - 1) / connections
        var latencies: [UInt32] = []
        latencies.reserveCapacity(perConn * connections)
        var errors = 0
        var answerBytes = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var batch = [UInt8](repeating: 0, count: pipeline * (lines.map(\.count).max() ?? 0))
        var lineIndex = 0

        func fill(_ c: Conn) throws {
            var used = 0
            let now = Clock.monotonicNanoseconds()
            while c.inFlight < pipeline && c.sent < perConn {
                let index = lineIndex % lines.count
                lineIndex += 1
                let line = lines[index]
                batch.withUnsafeMutableBytes { dst in line.withUnsafeBytes { dst.baseAddress!.advanced(by: used).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
                used += line.count
                c.sentAt.append(now)
                c.sentLine.append(index)
                c.inFlight += 1
                c.sent += 1
            }
            var off = 0
            while off < used {
                let n = try batch.withUnsafeBytes { (raw) throws(SystemError) in try UnixSocket.send(c.fd, UnsafeRawBufferPointer(rebasing: raw[off..<used])) }
                if n == 0 { usleep(50); continue }
                off += n
            }
        }

        let start = Clock.monotonicNanoseconds()
        for c in conns { try fill(c) }
        var done = 0
        let total = perConn * connections
        var events = [UInt32](repeating: 0, count: 256)
        var keys = [UInt64](repeating: 0, count: 256)
        while done < total {
            let n = clinux_epoll_wait(epfd, &events, &keys, 256, 5000)
            if n <= 0 { if n < 0 && errno == EINTR { continue }; throw SystemError("epoll_wait (no answer for 5 s)") }
            for i in 0..<Int(n) {
                let c = conns[Int(keys[i])]
                guard let got = try buffer.withMutableBytes({ (raw) throws(SystemError) in try UnixSocket.receive(c.fd, into: raw) }) else { continue }
                if got == 0 { throw SystemError("the server closed a connection") }
                let now = Clock.monotonicNanoseconds()
                answerBytes += got
                var off = 0
                while off < got {
                    guard c.sentHead < c.sentLine.count else { throw SystemError("the server sent more than was asked") }
                    let expected = answers[c.sentLine[c.sentHead]]
                    let take = min(expected.count - c.matched, got - off)
                    let same = buffer.withUnsafeBytes { b in expected.withUnsafeBytes { e in
                        memcmp(b.baseAddress! + off, e.baseAddress! + c.matched, take) == 0 } }
                    if !same { c.differs = true }
                    c.matched += take
                    off += take
                    if c.matched == expected.count {
                        if c.differs { errors += 1 }
                        latencies.append(UInt32(min(UInt64(UInt32.max), (now - c.sentAt[c.sentHead]) / 1000)))
                        c.matched = 0
                        c.differs = false
                        c.sentHead += 1
                        c.inFlight -= 1
                        done += 1
                    }
                }
                if c.sentHead > 4096 {
                    c.sentAt.removeFirst(c.sentHead); c.sentLine.removeFirst(c.sentHead); c.sentHead = 0
                }
                if c.inFlight == 0 || (pipeline > 1 && c.inFlight < pipeline / 2) { try fill(c) }
            }
        }
        let seconds = Clock.elapsed(since: start).inSeconds
        latencies.sort()
        func pct(_ p: Double) -> Double { latencies.isEmpty ? 0 : Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) }
        return LoadResult(requests: done, seconds: seconds, p50: pct(0.50), p99: pct(0.99), errors: errors, answerBytes: answerBytes)
    }
}

/// `read` of every cached image over the socket, bytes discarded into one
/// reused buffer (the client should cost as little as `cat`'s write to /dev/null).
enum ReadAllBenchmark {
    // Long on purpose: the benchmark's hot loop in one function (see `run()` above).
    /// Each receive is parsed where it lies: payload bytes are skipped in
    /// place, and only a header line cut by the end of a receive is kept
    /// (copying the bytes after a payload out and back in cost this client
    /// more than the daemon's whole answer once `read` used `sendfile`).
    static func run(socket: String, rounds: Int, window: Int = 16) throws {
        let list = try Client(socketPath: socket).call("list_images")
        let hashes = Array(Set((list["images"]?.array ?? []).compactMap { $0["hash"]?.string }))
        let fd = try UnixSocket.connect(path: socket)
        defer { fd.close() }
        UnixSocket.setReceiveBuffer(fd, bytes: 2 << 20)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var bytes = 0
        let start = Clock.monotonicNanoseconds()
        // Up to `window` reads in flight (16, as for `open`), so the server
        // prepares the next objects while this one is received, as a
        // throughput client would do.
        let order = (0..<rounds).flatMap { _ in hashes }
        var next = 0
        func sendRequest() throws(SystemError) {
            try Request.line(op: "read", [("hash", .string(order[next]))]).withBytes { (raw) throws(SystemError) in
                var off = 0
                while off < raw.count { off += try UnixSocket.send(fd, UnsafeRawBufferPointer(rebasing: raw[off...])) }
            }
            next += 1
        }
        while next < min(window, order.count) { try sendRequest() }
        var answered = 0
        var header: [UInt8] = []  // a header line begun in an earlier receive
        var remaining = 0  // payload bytes of the current answer still to come
        while answered < order.count {
            let n = try buffer.withMutableBytes { (raw) throws(SystemError) -> Int in try UnixSocket.receive(fd, into: raw) ?? 0 }
            guard n > 0 else { throw SystemError("recv", "the daemon closed the connection") }
            var i = 0
            while i < n {
                if remaining > 0 {
                    let take = min(remaining, n - i)
                    remaining -= take
                    i += take
                } else {
                    guard let nl = buffer[i..<n].firstIndex(of: 0x0A) else { header += buffer[i..<n]; break }
                    header += buffer[i..<nl]
                    i = nl + 1
                    guard let size = try JSONParser.parse(header)["size"]?.integer else {
                        throw SystemError("read", String(decoding: header, as: UTF8.self))
                    }
                    header.removeAll(keepingCapacity: true)
                    bytes += Int(size)
                    remaining = Int(size)
                }
                if remaining == 0 {
                    answered += 1
                    if next < order.count { try sendRequest() }
                }
            }
        }
        report(objects: hashes.count * rounds, bytes: bytes, since: start)
    }

    static func report(objects: Int, bytes: Int, since start: UInt64) {
        let seconds = Clock.elapsed(since: start).inSeconds
        print(String(format: "{\"objects\":%d,\"bytes\":%d,\"seconds\":%.3f,\"mib_per_s\":%.1f}",
                     objects, bytes, seconds, Double(bytes) / 1_048_576 / seconds))
    }

    /// The cached objects, one per hash: their hashes and file paths.
    static func objects(socket: String) throws -> [(hash: String, path: String)] {
        let list = try Client(socketPath: socket).call("list_images")
        var seen = Set<String>()
        var out: [(String, String)] = []
        for image in list["images"]?.array ?? [] {
            guard let hash = image["hash"]?.string, let path = image["path"]?.string, seen.insert(hash).inserted else { continue }
            out.append((hash, path))
        }
        return out
    }

    /// Reads `fd` to its end into `buffer` (128 KiB, as a plain reader would); the bytes read.
    @inline(__always)
    static func drain(_ fd: FileDescriptor, _ buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        var total = 0
        while true {
            let n = try fd.read(into: buffer)
            if n == 0 { return total }
            total += n
        }
    }

    /// The page-cache baseline: every object file opened, read into a
    /// 128 KiB buffer and closed, in this one process.
    static func runFiles(socket: String, rounds: Int) throws {
        let paths = try objects(socket: socket).map(\.path)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 128 << 10, alignment: 4096)
        defer { buffer.deallocate() }
        var bytes = 0
        let start = Clock.monotonicNanoseconds()
        for _ in 0..<rounds {
            for path in paths {
                let fd = try FileDescriptor.open(path, .readOnly)
                bytes += try drain(fd, buffer)
                fd.close()
            }
        }
        report(objects: paths.count * rounds, bytes: bytes, since: start)
    }

    /// `open` of every object, then its descriptor read into a 128 KiB
    /// buffer and closed; up to `window` opens in flight, so the daemon
    /// verifies the next objects while this one is read.
    static func runOpen(socket: String, rounds: Int, window: Int) throws {
        let hashes = try objects(socket: socket).map(\.hash)
        let client = try Client(socketPath: socket)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 128 << 10, alignment: 4096)
        defer { buffer.deallocate() }
        let order = (0..<rounds).flatMap { _ in hashes }
        var next = 0
        func sendRequest() throws {
            try client.send(Request.line(op: "open", [("hash", .string(order[next]))]))
            next += 1
        }
        var bytes = 0
        let start = Clock.monotonicNanoseconds()
        while next < min(window, order.count) { try sendRequest() }
        for _ in 0..<order.count {
            let opened = try client.readOpenAnswer()
            guard case let .file(fd, size, _) = opened else {
                throw SystemError("open", String(decoding: opened.answer.encoded, as: UTF8.self))
            }
            if next < order.count { try sendRequest() }
            let n = try drain(fd, buffer)
            fd.close()
            guard n == Int(size) else { throw SystemError("read", "\(n) bytes of an object of \(size)") }
            bytes += n
        }
        report(objects: order.count, bytes: bytes, since: start)
    }
}
