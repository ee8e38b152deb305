import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// HTTP/1.1 GETs to the daemon on 127.0.0.1, one fresh connection each
/// (`Connection: close`), every wait ending by one deadline for the whole answer.
enum DeadlineHTTP {
    /// The answer to `target` compared with `expected`: `status` with exactly
    /// `expected` as its body (and `contentRange` for a 206).
    static func get(port: Int, _ target: String, headers: [String] = [], expecting expected: ArraySlice<UInt8>,
                    status wanted: Int = 200, contentRange: String? = nil) throws -> Delivery {
        let connection = try DeadlineConnection(port: port, seconds: FaultScenario.deadline)
        try connection.send(request(port, target, headers))
        var buffer: [UInt8] = []
        guard let (status, fields) = try head(connection, &buffer) else { return .closed("before the head") }
        guard status == wanted else { return .refused("HTTP \(status), not \(wanted): \(fields)") }
        guard let length = fields["content-length"].flatMap(Int.init), length == expected.count else {
            return .wrong("Content-Length \(fields["content-length"] ?? "none"), not \(expected.count)")
        }
        if let contentRange, fields["content-range"] != contentRange {
            return .wrong("Content-Range \(fields["content-range"] ?? "none"), not \(contentRange)")
        }
        var check = ByteCheck(expected)
        check.take(buffer[...])
        while check.received < length {
            switch connection.receive() {
            case .bytes(let more): check.take(more[...])
            case .closed: return check.delivery
            case .timedOut: return .timedOut("\(check.received) of \(length) body bytes came")
            }
        }
        return check.delivery
    }

    /// The body of a 200 answer to `target`, as text.
    static func text(port: Int, _ target: String) throws -> String {
        let connection = try DeadlineConnection(port: port, seconds: FaultScenario.deadline)
        try connection.send(request(port, target, []))
        var buffer: [UInt8] = []
        guard let (status, fields) = try head(connection, &buffer), status == 200 else { throw HarnessError("GET \(target): no 200 head") }
        let length = fields["content-length"].flatMap(Int.init) ?? Int.max
        while buffer.count < length, case .bytes(let more) = connection.receive() { buffer += more }
        return String(decoding: buffer, as: UTF8.self)
    }

    private static func request(_ port: Int, _ target: String, _ headers: [String]) -> [UInt8] {
        Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\(headers.map { $0 + "\r\n" }.joined())\r\n".utf8)
    }

    /// The status and fields (lowercased names) of the head; what came after
    /// it is left in `buffer`. Nil when the connection closed first.
    private static func head(_ connection: DeadlineConnection, _ buffer: inout [UInt8]) throws -> (Int, [String: String])? {
        let end = Array("\r\n\r\n".utf8)
        while buffer.firstRange(of: end) == nil {
            switch connection.receive() {
            case .bytes(let more): buffer += more
            case .closed: return nil
            case .timedOut: throw ClientError.timedOut(socket: "127.0.0.1 HTTP", after: .seconds(FaultScenario.deadline))
            }
        }
        let split = buffer.firstRange(of: end)!
        let lines = String(decoding: buffer[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        buffer.removeFirst(split.upperBound)
        let parts = lines[0].split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw HarnessError("a bad status line: \(lines[0])") }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, fields)
    }
}

/// A TCP connection to 127.0.0.1 whose waits all end by one deadline.
final class DeadlineConnection {
    enum Received { case bytes([UInt8]), closed, timedOut }
    private let fd: Int32
    private let deadline: Deadline

    init(port: Int, seconds: Double) throws {
        deadline = Deadline(after: .seconds(seconds))
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw HarnessError("cannot connect to 127.0.0.1:\(port): \(reason)")
        }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw HarnessError("send: \(String(cString: strerror(errno)))") }
            sent += n
        }
    }

    /// The next bytes, the end of the stream (a reset too), or the deadline.
    func receive() -> Received {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            guard deadline.waitReadable(FileDescriptor(rawValue: fd)) else { return .timedOut }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 { return .bytes(Array(chunk[0..<n])) }
            if n == 0 || (errno != EINTR && errno != EAGAIN) { return .closed }
        }
    }
}

/// Pings the daemon on a connection of its own every 50 ms until stopped,
/// each ping answered within 5 s or recorded as a failure.
final class Pinger: Sendable {
    private struct State: Sendable {
        var stopping = false
        var joined = false
        var answered = 0
        var failures: [String] = []
    }
    private let state = Locked(State())
    private let finished = DispatchSemaphore(value: 0)

    init(socket: String) {
        let state = self.state, finished = self.finished
        Thread {
            Self.run(socket, state)
            finished.signal()
        }.start()
    }

    private static func run(_ socket: String, _ state: Locked<State>) {
        var client: Client?
        while !state.withLock({ $0.stopping }) {
            do {
                if client == nil { client = try Client(socketPath: socket, timeout: .answer(.seconds(5))) }
                client?.deadline = Deadline(after: .seconds(5))
                let answer = try client?.call("ping")
                state.withLock { $0.answered += 1 }
                if answer?["ok"] != .bool(true) { state.withLock { $0.failures.append("answered \(answer.map(text) ?? "")") } }
            } catch {
                client = nil
                state.withLock { $0.failures.append("\(error)") }
            }
            usleep(50_000)
        }
    }

    /// Stops (once; later calls return the same) and says how pings went.
    func stop() -> (answered: Int, failures: [String]) {
        let wait = state.withLock { s in
            defer { s.stopping = true; s.joined = true }
            return !s.joined
        }
        if wait { finished.wait() }
        return state.withLock { ($0.answered, $0.failures) }
    }
}
