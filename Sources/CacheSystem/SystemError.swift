#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: which call, on what, and the errno it returned.
///
/// The description reads like a sentence an operator can act on, for example
/// `open(/var/cache/cached/index.log): Permission denied (errno 13)`.
public struct SystemError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The name of the call, for example `"open"` or `"fsync"`.
    public var call: String
    /// The path or other subject of the call, if any.
    public var subject: String
    /// The `errno` value.
    public var errno: Int32

    public init(_ call: String, _ subject: String = "", errno: Int32 = Glibc.errno) {
        self.call = call
        self.subject = subject
        self.errno = errno
    }

    /// True when the device is full or the quota is exhausted.
    public var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }

    public var description: String {
        let reason = String(cString: strerror(errno))
        return subject.isEmpty ? "\(call): \(reason) (errno \(errno))"
                               : "\(call)(\(subject)): \(reason) (errno \(errno))"
    }
}

/// Calls `body` until it does not fail with `EINTR`; nil when it fails with
/// one of `quiet` (for example `EAGAIN`: it would block); any other
/// negative result throws. The one EINTR loop of the syscall wrappers.
@inline(__always)
func retryingOnInterrupt<T: BinaryInteger>(_ call: String, _ subject: String = "", nilOn quiet: Set<Int32>,
                                           _ body: () -> T) throws(SystemError) -> T? {
    while true {
        let result = body()
        if result >= 0 { return result }
        if errno == EINTR { continue }
        if quiet.contains(errno) { return nil }
        throw SystemError(call, subject)
    }
}

/// Calls `body` until it does not fail with `EINTR`; a negative result throws.
@inline(__always)
func retryingOnInterrupt<T: BinaryInteger>(_ call: String, _ subject: String = "", _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        if errno == EINTR { continue }
        throw SystemError(call, subject)
    }
}
