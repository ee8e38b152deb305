/// The one test of what may be fetched: http and https URLs only.
public enum URLScheme {
    /// True when `url` starts with `http://` or `https://` (any case).
    public static func isHTTP(_ url: String) -> Bool {
        let lower = url.prefix(8).lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }

    /// True when `scheme` (without "://") is http or https (any case).
    public static func isHTTP(scheme: some StringProtocol) -> Bool {
        let lower = scheme.lowercased()
        return lower == "http" || lower == "https"
    }
}
