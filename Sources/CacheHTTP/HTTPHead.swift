#if canImport(Glibc)
import Glibc
#endif

/// Builds a response head in one buffer: the status line, header fields
/// and the empty line. Values are the front-end's own (numbers, hashes,
/// fixed types), never a client's bytes, so none holds a CR or LF.
public struct HTTPHead: Sendable {
    public private(set) var bytes: [UInt8]

    /// A head for `status`, HTTP/1.1 (the version a server sends whatever
    /// the request's, RFC 9110, 6.2).
    public init(_ status: HTTPStatus, capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(contentsOf: "HTTP/1.1 ".utf8)
        appendNumber(status.code)
        bytes.append(0x20)
        bytes.append(contentsOf: status.reason.utf8)
        bytes.append(contentsOf: "\r\n".utf8)
    }

    public mutating func field(_ name: StaticString, _ value: String) {
        appendName(name)
        bytes.append(contentsOf: value.utf8)
        bytes.append(contentsOf: "\r\n".utf8)
    }

    public mutating func field(_ name: StaticString, _ value: some BinaryInteger) {
        appendName(name)
        appendNumber(Int64(value))
        bytes.append(contentsOf: "\r\n".utf8)
    }

    public mutating func field(_ name: StaticString, raw value: [UInt8]) {
        appendName(name)
        bytes.append(contentsOf: value)
        bytes.append(contentsOf: "\r\n".utf8)
    }

    /// The empty line that ends the head; `body`, if any, right after it.
    public mutating func finish(body: [UInt8] = []) -> [UInt8] {
        bytes.append(contentsOf: "\r\n".utf8)
        bytes.append(contentsOf: body)
        return bytes
    }

    private mutating func appendName(_ name: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(contentsOf: ": ".utf8)
    }

    private mutating func appendNumber(_ value: some BinaryInteger) {
        var v = Int64(value)
        if v < 0 { bytes.append(UInt8(ascii: "-")); v = -v }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = 0
        withUnsafeMutableBytes(of: &digits) { d in
            repeat {
                d[n] = UInt8(truncatingIfNeeded: v % 10) + 0x30
                v /= 10
                n += 1
            } while v > 0
            for i in stride(from: n - 1, through: 0, by: -1) { bytes.append(d[i]) }
        }
    }
}
