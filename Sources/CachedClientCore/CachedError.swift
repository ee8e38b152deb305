import CacheProtocol

/// Why a call failed: the daemon's error code (docs/protocol.md, "Errors"),
/// or why it could not be asked.
public struct CachedError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, Equatable, CaseIterable {
        // The daemon's codes.
        case badRequest = "bad_request"
        case notFound = "not_found"
        case notCached = "not_cached"
        case upstream
        case tooLarge = "too_large"
        case busy
        case `internal`
        /// The daemon could not be reached, or the connection broke before
        /// the answer came (a request in flight may or may not have run).
        case unavailable
        /// The daemon did not answer within the timeout.
        case timedOut
        /// The daemon answered something this client cannot read.
        case malformed
        /// The task waiting for the answer was cancelled.
        case cancelled
    }

    public var code: Code
    public var message: String
    /// Nothing listened on the socket, or the daemon did not answer in
    /// time (cachectl's exit status 3), as opposed to a connection that broke.
    package var isNotRunning = false

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) (\(code.rawValue))" }

    package init(_ e: ClientError) {
        switch e {
        case .timedOut: self.init(.timedOut, e.description)
        case .malformed: self.init(.malformed, e.description)
        default: self.init(.unavailable, e.description)
        }
        switch e {
        case .notRunning, .timedOut: isNotRunning = true
        default: break
        }
    }

    /// The error of an `{"ok":false,...}` answer, or nil for an ok one.
    package init?(answer: JSON) {
        guard answer["ok"]?.bool != true else { return nil }
        let code = answer["error"]?["code"]?.string ?? "internal"
        self.init(Code(rawValue: code).flatMap { [.unavailable, .timedOut, .malformed, .cancelled].contains($0) ? nil : $0 } ?? .internal,
                  answer["error"]?["message"]?.string ?? "the daemon answered without a reason")
    }
}
