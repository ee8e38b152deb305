import CacheFetch
import CacheSystem

extension Settings {
    /// Every setting, in the order `--help`, the SIGHUP line and the
    /// environment check use (0.1.0's order: the feeds, the store, the
    /// fetch settings, the socket's limits, TLS and the proxy).
    static let table: [SettingSpec] = [
        .make("posts-url", "URL", .live, "URL of the JSON posts feed (no default: posts are never fetched)",
              \.postsURL, parse: { k, v throws(SettingsError) in try ValueParser.url(k, v) }, format: optional),
        .make("images-url", "URL", .live, "URL of the JSON image manifest (no default)",
              \.imagesURL, parse: { k, v throws(SettingsError) in try ValueParser.url(k, v) }, format: optional),
        .make("images-base-url", "URL", .live, "base for relative image URLs (default: the manifest's directory)",
              \.imagesBaseURL, parse: { k, v throws(SettingsError) in try ValueParser.url(k, v) }, format: optional),
        .make("store", "DIR", .restart, "the store directory",
              \.store, parse: { k, v throws(SettingsError) in try ValueParser.path(k, v) }, format: { $0 }),
        .make("socket", "PATH", .restart, "the socket's path (at most 107 bytes)",
              \.socket, parse: { k, v throws(SettingsError) in try ValueParser.socketPath(k, v) }, format: { $0 }),
        .make("max-size", "SIZE", .restart, "cap on the bytes of cached images; 0 = none",
              \.maxSize, parse: { k, v throws(SettingsError) in try ValueParser.size(k, v) }, format: { String($0) }),
        .make("max-object-size", "SIZE", .live, "largest image or feed body accepted",
              \.maxObjectSize, parse: { k, v throws(SettingsError) in try ValueParser.size(k, v, minimum: 1, "greater than 0") }, format: { String($0) }),
        .make("concurrency", "N", .restart, "parallel downloads, 1 to 256",
              \.fetch.concurrency, parse: { k, v throws(SettingsError) in try ValueParser.whole(k, v, 1...256) }, format: { String($0) }),
        .make("prefetch-on-start", "[BOOL]", .restart, "run a full prefetch right after start",
              \.prefetchOnStart, parse: { k, v throws(SettingsError) in try ValueParser.bool(k, v) }, format: { String($0) }),
        .make("log-level", "LEVEL", .live, "error, warning, notice, info or debug",
              \.logLevel, parse: { k, v throws(SettingsError) in try ValueParser.logLevel(k, v) }, format: { $0.name }),
        .make("retries", "N", .restart, "retries of a failed transfer or a 5xx, 0 to 20",
              \.fetch.retries, parse: { k, v throws(SettingsError) in try ValueParser.whole(k, v, 0...20) }, format: { String($0) }),
        .make("retry-delay", "SECONDS", .restart, "first retry's delay, doubled per retry, with jitter",
              \.fetch.backoffBase, parse: { k, v throws(SettingsError) in try ValueParser.seconds(k, v, allowZero: true) }, format: { "\($0)" }),
        .make("connect-timeout", "SECONDS", .restart, "longest wait for a connection",
              \.fetch.connectTimeout, parse: { k, v throws(SettingsError) in try ValueParser.seconds(k, v) }, format: { "\($0)" }),
        .make("timeout", "SECONDS", .restart, "longest a whole transfer may take",
              \.fetch.totalTimeout, parse: { k, v throws(SettingsError) in try ValueParser.seconds(k, v) }, format: { "\($0)" }),
        .make("stall-timeout", "SECONDS", .restart, "a transfer that moves no byte for this long fails",
              \.fetch.lowSpeedTime, parse: { k, v throws(SettingsError) in max(1, Int(try ValueParser.seconds(k, v).rounded(.up))) }, format: { String($0) }),
        .make("max-redirects", "N", .restart, "redirects followed, 0 to 50",
              \.fetch.maxRedirects, parse: { k, v throws(SettingsError) in try ValueParser.whole(k, v, 0...50) }, format: { String($0) }),
        .make("max-connections", "N", .live, "connections served at once; one more gets busy",
              \.maxConnections, parse: { k, v throws(SettingsError) in try ValueParser.whole(k, v, 1...1_000_000) }, format: { String($0) }),
        .make("idle-timeout", "SECONDS", .live, "a silent connection with nothing pending is closed after this; 0 = never",
              \.idleTimeout, parse: { k, v throws(SettingsError) in try ValueParser.seconds(k, v, allowZero: true) }, format: { "\($0)" }),
        .make("max-queued-bytes", "SIZE", .live, "answer bytes queued for a client before its requests stop being read (at least 64K)",
              \.maxQueuedBytes, parse: { k, v throws(SettingsError) in try ValueParser.size(k, v, minimum: 64 << 10, "at least 64K") }, format: { String($0) }),
        .make("max-json-depth", "N", .live, "deepest nesting accepted in a request, 2 to 1000",
              \.maxJSONDepth, parse: { k, v throws(SettingsError) in try ValueParser.whole(k, v, 2...1000) }, format: { String($0) }),
        .make("ca-file", "PEM", .restart, "more trusted CA certificates, a PEM file (added to the system's)",
              \.fetch.caFile, parse: { k, v throws(SettingsError) in try ValueParser.readable(k, v, directory: false) }, format: optional),
        .make("ca-path", "DIR", .restart, "more trusted CA certificates, a hashed directory",
              \.fetch.caPath, parse: { k, v throws(SettingsError) in try ValueParser.readable(k, v, directory: true) }, format: optional),
        .make("proxy", "URL|none", .restart, "the proxy for every fetch; none: no proxy, not even from the environment",
              \.fetch.proxy, parse: { _, v throws(SettingsError) in try ValueParser.proxy(v) }, format: optional),
        .make("no-proxy", "HOSTS", .restart, "comma-separated hosts, domains or CIDR ranges fetched without the proxy",
              \.fetch.noProxy, parse: { _, v throws(SettingsError) in try ValueParser.hostList(v) }, format: optional),
    ]

    private static let optional: @Sendable (String?) -> String = { $0 ?? "-" }
}
