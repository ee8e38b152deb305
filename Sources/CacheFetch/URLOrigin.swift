import CCurl

/// The origin of a URL (RFC 6454): scheme, host and port, read by libcurl's
/// own URL parser, so that it is the origin libcurl connects to. The scheme
/// and host are lowercased and a missing port is the scheme's default, so
/// `HTTPS://Feeds.Example` and `https://feeds.example:443/x` are one origin.
public struct URLOrigin: Hashable, Sendable, CustomStringConvertible {
    public let scheme: String
    /// Lowercased; an IPv6 literal keeps its brackets.
    public let host: String
    public let port: Int

    /// Nil when `url` is not an absolute http or https URL libcurl can parse.
    public init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK,
              let scheme = Self.part(handle, CURLUPART_SCHEME, flags: 0)?.lowercased(),
              scheme == "http" || scheme == "https",
              let host = Self.part(handle, CURLUPART_HOST, flags: 0), !host.isEmpty,
              let portText = Self.part(handle, CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)),
              let port = Int(portText) else { return nil }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
    }

    private static func part(_ handle: OpaquePointer, _ what: CURLUPart, flags: UInt32) -> String? {
        var out: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, what, &out, flags) == CURLUE_OK, let out else { return nil }
        defer { curl_free(out) }
        return String(cString: out)
    }

    /// `scheme://host:port`, the port always shown.
    public var description: String { "\(scheme)://\(host):\(port)" }
}
