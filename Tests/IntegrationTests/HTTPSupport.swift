import Foundation
import CacheProtocol

/// A daemon with the HTTP front-end on a loopback port and a Unix socket,
/// its origin a real nginx serving Examples/origin.
final class HTTPFixture {
    let nginx: Nginx
    let daemon: Daemon
    let port: Int
    let httpSocket: String

    init(prefetch: Bool = true, arguments: [String] = []) throws {
        nginx = try Nginx()
        port = try unusedLocalPort()
        let scratch = Scratch()
        httpSocket = scratch.path + "/http.sock"
        daemon = try Daemon(origin: nil, arguments: ["--posts-url", nginx.postsURL, "--images-url", nginx.manifestURL,
                                                     "--http-listen", "127.0.0.1:\(port),\(httpSocket)"] + arguments, scratch: scratch)
        if prefetch {
            let r = try cachectl(["prefetch"], socket: daemon.socket)
            guard r.status == 0 else { throw HarnessError("cachectl prefetch: \(r.stderr)\n\(daemon.log.suffix(2000))") }
        }
    }

    var base: String { "http://127.0.0.1:\(port)" }

    /// Runs curl; its exit status, the body written to a file, and the
    /// response heads (`-D`), which hold one head per response.
    func curl(_ arguments: [String]) throws -> (status: Int32, body: [UInt8], heads: String, stderr: String) {
        try requireInstalled("/usr/bin/curl", package: "curl")
        let scratch = Scratch()
        let body = scratch.path + "/body", heads = scratch.path + "/heads"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        p.arguments = ["-sS", "--max-time", "20", "-o", body, "-D", heads] + arguments
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        let b = (try? Data(contentsOf: URL(fileURLWithPath: body))).map(Array.init) ?? []
        let h = (try? String(contentsOfFile: heads, encoding: .utf8)) ?? ""
        return (p.terminationStatus, b, h, stderr)
    }
}

/// One parsed HTTP response.
struct HTTPAnswer {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
    func header(_ name: String) -> String? { headers.first { $0.0 == name.lowercased() }?.1 }
    /// The JSON error body's code.
    var errorCode: String? { (try? JSONParser.parse(body))?["error"]?["code"]?.string }
}

/// A raw HTTP connection over a Unix socket, for what a well-behaved client
/// never sends: bytes exactly as given, answers parsed as they come.
final class RawHTTP {
    let fd: Int32
    private var buffer: [UInt8] = []
    private(set) var closed = false

    init(path: String, timeout: Int = 15) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket failed") }
        var t = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard rc == 0 else { Foundation.close(fd); throw HarnessError("cannot connect to \(path): \(String(cString: strerror(errno)))") }
    }

    deinit { Foundation.close(fd) }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { throw HarnessError("send: \(String(cString: strerror(errno)))") }
            sent += n
        }
    }

    /// Reads more; false at the end of the stream (or on a timeout).
    @discardableResult
    func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { closed = true; return false }
        buffer += chunk[0..<n]
        return true
    }

    /// The next response; `head` for the answer to a HEAD (no body).
    func response(head: Bool = false) throws -> HTTPAnswer {
        while buffer.firstRange(of: Array("\r\n\r\n".utf8)) == nil {
            guard fill() else { throw HarnessError("the connection ended before a response (\(buffer.count) bytes: \(String(decoding: buffer, as: UTF8.self)))") }
        }
        let split = buffer.firstRange(of: Array("\r\n\r\n".utf8))!
        let lines = String(decoding: buffer[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, lines[0].hasPrefix("HTTP/1.1 "), let status = Int(statusParts[1]) else {
            throw HarnessError("a bad status line: \(lines[0])")
        }
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { throw HarnessError("a bad header line: \(line)") }
            headers.append((line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        buffer.removeFirst(split.upperBound)
        let length = head || status == 304 ? 0 : Int(headers.first { $0.0 == "content-length" }?.1 ?? "0") ?? 0
        while buffer.count < length {
            guard fill() else { throw HarnessError("the connection ended in a body (\(buffer.count) of \(length))") }
        }
        let body = Array(buffer[..<length])
        buffer.removeFirst(length)
        return HTTPAnswer(status: status, headers: headers, body: body)
    }

    /// The next chunk of a chunked body (nil at its end or the stream's).
    func chunk() -> [UInt8]? {
        while true {
            if let lineEnd = buffer.firstRange(of: Array("\r\n".utf8)),
               let size = Int(String(decoding: buffer[..<lineEnd.lowerBound], as: UTF8.self), radix: 16),
               buffer.count >= lineEnd.upperBound + size + 2 {
                let data = Array(buffer[lineEnd.upperBound..<(lineEnd.upperBound + size)])
                buffer.removeFirst(lineEnd.upperBound + size + 2)
                return size == 0 ? nil : data
            }
            guard fill() else { return nil }
        }
    }

    /// True when the server closes the connection (within the timeout).
    func closesConnection() -> Bool {
        while fill() {}
        return closed && buffer.isEmpty
    }
}

/// A request head with `Host`, CRLFs and the empty line.
func httpGet(_ path: String, method: String = "GET", _ extra: [String] = []) -> String {
    "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\n" + extra.map { $0 + "\r\n" }.joined() + "\r\n"
}


/// A GET over HTTP/1.0 (the server closes the connection after the answer),
/// bounded by a 15 s receive timeout.
enum SimpleHTTP {
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static func get(port: Int, path: String) throws -> Answer {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket failed") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { throw HarnessError("cannot connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 { throw HarnessError("GET \(path): \(String(cString: strerror(errno))) after \(response.count) bytes") }
            if n == 0 { break }
            response += buffer[0..<n]
        }
        guard let split = response.firstRange(of: Array("\r\n\r\n".utf8)) else { throw HarnessError("GET \(path): no HTTP head in \(response.count) bytes") }
        let head = String(decoding: response[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = head.first?.split(separator: " ") ?? []
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw HarnessError("GET \(path): status line \(head.first ?? "")") }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: status, headers: headers, body: Array(response[split.upperBound...]))
    }
}
