import CacheHTTP

/// Which `Host`s the HTTP front-end answers for, and whether an admin POST
/// comes from the front-end's own origin (docs/http.md, "Hosts and
/// origins"). The same on every listener: behind a proxy, the Unix socket
/// gets whatever `Host` the proxy's clients sent.
struct HTTPHostPolicy: Sendable, Equatable {
    /// Host names answered for besides IP literals and `localhost`
    /// (`http-allowed-hosts`), lowercased, any port.
    let allowedHosts: Set<String>
    /// Whether the scheme of the client's connection is taken from
    /// `Forwarded: proto=` and `X-Forwarded-Proto` (`http-trust-forwarded`);
    /// else it is `http`, the daemon's own.
    let trustForwarded: Bool

    init(allowedHosts: [String] = [], trustForwarded: Bool = false) {
        self.allowedHosts = Set(allowedHosts.map { $0.lowercased() })
        self.trustForwarded = trustForwarded
    }

    /// Nil when a request for `authority` (its `Host`, as the parser read
    /// it) is served; else why it is not (421). A page elsewhere can rebind
    /// a name of its own to this host's addresses, but never an IP literal,
    /// and not `localhost`.
    func refusal(_ authority: HTTPAuthority?) -> String? {
        guard let a = authority else { return "a request without Host names no host this server answers for: send Host" }
        if a.isIPLiteral || a.host == "localhost" || allowedHosts.contains(a.host) { return nil }
        return "this server does not answer for the host \"\(a.host)\" (http-allowed-hosts)"
    }

    /// Nil when `origin` (an `Origin` header) is the origin `request` was
    /// sent to: the same scheme, host and port (a missing port is the
    /// scheme's default). Else why not (403).
    func originRefusal(_ origin: String, _ request: HTTPRequest) -> String? {
        let scheme: String
        switch self.scheme(request) {
        case .success(let s): scheme = s
        case .failure(let e): return e.message
        }
        guard let own = request.authority else { return "a POST without a Host is refused" }
        guard let other = Self.origin(origin), other.scheme == scheme, other.authority.host == own.host,
              (other.authority.port ?? Self.defaultPort(other.scheme)) == (own.port ?? Self.defaultPort(scheme)) else {
            return "a POST from another origin (\(origin), not \(scheme)://\(request.host ?? "")) is refused"
        }
        return nil
    }

    /// A forwarded scheme that cannot be used.
    struct ForwardedSchemeError: Error, Equatable {
        let message: String
    }

    /// The scheme the client used: `http`, or with `trustForwarded` what
    /// the proxy says (the last element of each header; both, if present, agree).
    func scheme(_ request: HTTPRequest) -> Result<String, ForwardedSchemeError> {
        guard trustForwarded else { return .success("http") }
        let said = [request.lastForwardedProto, request.lastXForwardedProto].compactMap { $0?.lowercased() }
        if said.count == 2 && said[0] != said[1] {
            return .failure(ForwardedSchemeError(message: "Forwarded and X-Forwarded-Proto disagree on the scheme (\(said[0]), \(said[1]))"))
        }
        guard let scheme = said.first else { return .success("http") }
        guard scheme == "http" || scheme == "https" else {
            return .failure(ForwardedSchemeError(message: "a forwarded scheme that is not http or https (\(scheme))"))
        }
        return .success(scheme)
    }

    /// `scheme://host[:port]` and nothing more (a serialized origin); nil for `null` or anything else.
    static func origin(_ text: String) -> (scheme: String, authority: HTTPAuthority)? {
        guard let sep = text.firstRange(of: "://") else { return nil }
        let scheme = text[..<sep.lowerBound].lowercased()
        guard !scheme.isEmpty, let authority = HTTPAuthority(String(text[sep.upperBound...])) else { return nil }
        return (scheme, authority)
    }

    static func defaultPort(_ scheme: String) -> Int? {
        switch scheme {
        case "http": return 80
        case "https": return 443
        default: return nil
        }
    }
}
