import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// One image of the test origin, and where the daemon keeps it.
struct FaultImage {
    var row: Int
    var name: String
    var bytes: [UInt8]
    var hash = ""
    /// `objects/ab/...`, as the daemon's log may name it (absolute or not).
    var objectPath = ""

    /// A PNG signature and IHDR chunk header, then random bytes (so that any
    /// 64 of them are found once on the device).
    static func png(row: Int, name: String, size: Int) -> FaultImage {
        let head: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D] + Array("IHDR".utf8)
        return FaultImage(row: row, name: name, bytes: head + randomBytes(size - head.count))
    }
}

/// `count` bytes from /dev/urandom.
func randomBytes(_ count: Int) -> [UInt8] {
    let data = FileHandle(forReadingAtPath: "/dev/urandom")?.readData(ofLength: count) ?? Data()
    precondition(data.count == count, "/dev/urandom gave \(data.count) of \(count) bytes")
    return Array(data)
}

/// How a request for a rotted object ended, every byte compared with the original.
enum Delivery: CustomStringConvertible {
    case exact
    /// An error answer (the socket) or a status other than the one asked for (HTTP).
    case refused(String)
    /// The connection closed before the answer line or head.
    case closed(String)
    /// The answer line or head came, then the connection closed in the bytes.
    case cut(received: Int, of: Int)
    /// Reading the descriptor `open` passed failed.
    case readError(errno: Int32, at: Int)
    case wrong(String)
    case timedOut(String)
    case failed(String)
    /// Not sent: an earlier request of the test hung.
    case notTried

    var description: String {
        switch self {
        case .exact: "the exact bytes"
        case .refused(let why): "refused: \(why)"
        case .closed(let when): "the connection closed \(when)"
        case let .cut(received, of): "the connection closed after \(received) of \(of) bytes"
        case let .readError(e, at): "reading the passed descriptor failed at byte \(at): \(String(cString: strerror(e)))"
        case .wrong(let what): "WRONG BYTES: \(what)"
        case .timedOut(let what): "no complete answer within \(FaultScenario.deadline) s: \(what)"
        case .failed(let what): "failed: \(what)"
        case .notTried: "not tried"
        }
    }

    /// What a request may end with: `settled` is a request after the fault
    /// was handled (only the exact bytes); in `on-change` mode a request for a
    /// rotted object may also end in an error (socket), a cut (socket, HTTP)
    /// or EIO from the passed descriptor (`open`).
    enum Ask { case socketRead, open, http, settled }

    func isAcceptable(for ask: Ask, _ mode: VerifyReads) -> Bool {
        if case .exact = self { return true }
        guard mode == .onChange else { return false }
        switch (ask, self) {
        case (.socketRead, .refused), (.socketRead, .closed), (.socketRead, .cut), (.http, .cut): return true
        case (.open, .readError(let e, _)): return e == EIO
        default: return false
        }
    }
}

/// Compares bytes as they arrive with what they must be.
struct ByteCheck {
    let expected: ArraySlice<UInt8>
    private(set) var received = 0
    private(set) var firstWrong: Int?

    init(_ expected: ArraySlice<UInt8>) { self.expected = expected }

    mutating func take(_ chunk: ArraySlice<UInt8>) {
        defer { received += chunk.count }
        guard firstWrong == nil else { return }
        let same = min(expected.count - received, chunk.count)
        let want = expected.dropFirst(received).prefix(same)
        if let i = Self.firstDifference(want, chunk.prefix(same)) {
            firstWrong = received + i
        } else if chunk.count > same {
            firstWrong = expected.count
        }
    }

    /// What came, once the sender stopped (or all came).
    var delivery: Delivery {
        if let firstWrong { return .wrong("byte \(firstWrong) is not the original's (\(received) of \(expected.count) received)") }
        return received < expected.count ? .cut(received: received, of: expected.count) : .exact
    }

    static func firstDifference(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Int? {
        guard !a.isEmpty else { return nil }
        let equal = a.withUnsafeBytes { x in b.withUnsafeBytes { y in memcmp(x.baseAddress!, y.baseAddress!, a.count) == 0 } }
        if equal { return nil }
        return zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset
    }
}

