#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// Why a client call failed.
public enum ClientError: Error, CustomStringConvertible, Sendable {
    /// Nothing listens on the socket.
    case notRunning(socket: String, cause: SystemError)
    /// The daemon did not answer within the client's timeout: it is stopped
    /// (SIGSTOP, a debugger), hung, or the socket's listener never accepts.
    case timedOut(socket: String, after: Duration)
    /// The socket's directory could be written by another user, who could
    /// have replaced the socket: nothing was sent. `reason` says how to fix it.
    case untrustedDirectory(socket: String, reason: String)
    /// The daemon closed the connection before answering: an end of file, or
    /// the connection reset (a daemon that is stopping closes connections
    /// whose requests it has not read, and the kernel resets them).
    case closed(socket: String)
    /// The daemon answered something that is not a protocol line.
    case malformed(String)
    case io(SystemError)

    public var description: String {
        switch self {
        case let .notRunning(socket, cause):
            let why = cause.errno == ENOENT ? "no socket at \(socket)" : "\(cause)"
            return "cannot connect to cached at \(socket): \(why) (is the daemon running? set --socket or CACHED_SOCKET)"
        case let .timedOut(socket, span):
            return "no answer from cached at \(socket) within \(span.secondsText) s " +
                "(is it stopped? check systemctl status cached)"
        case let .untrustedDirectory(socket, reason):
            return "refusing to connect to cached at \(socket): \(reason)"
        case let .closed(socket):
            return "cached closed the connection on \(socket) before answering (is it stopping or restarting? check systemctl status cached)"
        case let .malformed(what): return "malformed answer from cached: \(what)"
        case let .io(e): return "socket error: \(e)"
        }
    }
}

/// How long a `Client` waits for the daemon before `ClientError.timedOut`.
///
/// A timeout is a limit on the daemon's silence: each wait (connecting,
/// sending, each read of answer bytes) gets the full time again. A quick
/// call also needs a limit on the whole answer, or a daemon that trickles a
/// byte per wait holds it forever: `Client.deadline`, which the client
/// libraries (and so cachectl) set for the calls the daemon answers at once.
public enum ClientTimeout: Sendable, Equatable {
    /// Wait as long as it takes (the default: tests and benchmarks).
    case none
    /// Connecting, sending and every wait for answer bytes must each end
    /// within the span: for answers the daemon gives at once (`ping`,
    /// `status`, `get_post`, `list_posts`).
    case answer(Duration)
    /// Connecting and sending must end within the span; while an answer is
    /// awaited, after each span of silence the daemon is sent `ping` on a
    /// second connection, and the client gives up only when that is not
    /// answered within the span. For operations that may rightly take
    /// minutes (a prefetch, a read-through download, verify, gc, compact):
    /// they are never cut while the daemon is alive.
    case whileAlive(Duration)

    /// `seconds` as a timeout of `kind`'s, `.none` for 0 (or less): how
    /// `cachectl --timeout` and the Swift library's `timeout:` read.
    public static func seconds(_ seconds: Double, mayTakeLong: Bool) -> ClientTimeout {
        guard seconds > 0 else { return .none }
        return mayTakeLong ? .whileAlive(.clampedSeconds(seconds)) : .answer(.clampedSeconds(seconds))
    }

    /// The limit on one wait, nil for none (zero or beyond what `timeval` holds).
    public var limit: Duration? {
        switch self {
        case .none: nil
        case .answer(let s), .whileAlive(let s): s > .zero && s < .seconds(Int32.max) ? s : nil
        }
    }


}
