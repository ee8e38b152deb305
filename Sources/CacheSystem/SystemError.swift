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
/// `quiet` or `alsoQuiet` (for example `EAGAIN`: it would block); any other
/// negative result throws. The one EINTR loop of the syscall wrappers (on
/// the hot path of every socket read and write: no allocation, and the
/// subject is built only for an error).
@inline(__always)
func retryingOnInterrupt<T: BinaryInteger>(_ call: StaticString, _ subject: @autoclosure () -> String = "",
                                           nilOn quiet: Int32, or alsoQuiet: Int32 = 0,
                                           _ body: () -> T) throws(SystemError) -> T? {
    while true {
        let result = body()
        if result >= 0 { return result }
        let e = errno
        if e == EINTR { continue }
        if e == quiet || (alsoQuiet != 0 && e == alsoQuiet) { return nil }
        throw SystemError("\(call)", subject(), errno: e)
    }
}

/// Calls `body` until it does not fail with `EINTR`; a negative result throws.
@inline(__always)
func retryingOnInterrupt<T: BinaryInteger>(_ call: StaticString, _ subject: @autoclosure () -> String = "",
                                           _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        let e = errno
        if e == EINTR { continue }
        throw SystemError("\(call)", subject(), errno: e)
    }
}
