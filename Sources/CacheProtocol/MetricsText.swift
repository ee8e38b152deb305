/// The status answer in the Prometheus text exposition format (version
/// 0.0.4): what `cachectl metrics` prints and the daemon's HTTP `/metrics`
/// serves (docs/http.md, "Routes").
public enum MetricsText {
    /// The content type of the text.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// `s` is the status answer (`status`'s JSON object).
    public static func render(_ s: JSON) -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: JSON?) {
            guard let v = value?.integer else { return }
            out += "# HELP cached_\(name) \(help)\n# TYPE cached_\(name) \(type)\ncached_\(name) \(v)\n"
        }
        metric("posts", "gauge", "Posts stored.", s["posts"])
        metric("images", "gauge", "Rows of the image manifest.", s["images"])
        metric("images_cached", "gauge", "Rows whose image is cached.", s["images_cached"])
        metric("objects", "gauge", "Object files in the store.", s["objects"])
        metric("variants", "gauge", "Image variants stored (each is also an object).", s["variants"])
        metric("object_bytes", "gauge", "Bytes of the object files.", s["bytes"])
        metric("max_bytes", "gauge", "The max-size cap in bytes (0: none).", s["max_bytes"])
        metric("uptime_seconds", "gauge", "Seconds since the daemon started.", s["uptime_s"])
        metric("log_records", "gauge", "Records in the index log.", s["log_records"])
        metric("connections", "gauge", "Client connections open now.", s["counters"]?["connections"])
        let counters: [(String, String, String)] = [
            ("requests", "requests", "Requests answered."), ("hits", "hits", "Images served from the store."),
            ("misses", "misses", "Images that had to be downloaded on request."), ("downloads", "downloads", "Images downloaded."),
            ("download_bytes", "download_bytes", "Bytes of images downloaded."),
            ("coalesced", "coalesced", "Requests that joined a download, feed refresh or prefetch already running."),
            ("errors", "errors", "Error answers sent."), ("upstream_errors", "upstream_errors", "Failed fetches from the origin."),
            ("quarantined", "quarantined", "Objects that failed verification or could not be read, set aside."),
            ("read_errors", "read_errors", "Read errors (EIO) met on object files."), ("evictions", "evictions", "Objects evicted by max-size."),
            ("variants_made", "variants_made", "Image variants made by a helper and stored."),
            ("variant_hits", "variant_hits", "Image variants served from the store."),
            ("variant_failures", "variant_failures", "Image variant requests that failed (image refused, helper failed)."),
            ("variant_jobs", "variant_jobs", "Image variant jobs given to the helpers (each a decode of its original)."),
        ]
        for (name, key, help) in counters { metric(name + "_total", "counter", help, s["counters"]?[key]) }
        if let mode = s["verify_reads"]?.string {
            out += "# HELP cached_verify_reads The verify-reads mode in effect (1 for the mode in effect).\n# TYPE cached_verify_reads gauge\n"
            for m in ["always", "on-change"] { out += "cached_verify_reads{mode=\"\(m)\"} \(m == mode ? 1 : 0)\n" }
        }
        // Absent until a prefetch finished since the daemon started.
        if let last = s["last_prefetch"], let finished = last["finished"]?.double, finished.isFinite, finished >= 0,
           let whole = Int64(exactly: finished.rounded(.down)) {
            // Whole seconds: every sample of this text is an integer (a daemon's
            // value out of range is left out, never trapped on).
            let text = String(whole)
            out += "# HELP cached_last_prefetch_timestamp_seconds When the last prefetch finished (unix seconds), whether it succeeded or not.\n"
            out += "# TYPE cached_last_prefetch_timestamp_seconds gauge\ncached_last_prefetch_timestamp_seconds \(text)\n"
            let ok = last["succeeded"] == .bool(true) ? 1 : 0
            out += "# HELP cached_last_prefetch_success Whether the last prefetch succeeded (1) or failed as a whole (0).\n"
            out += "# TYPE cached_last_prefetch_success gauge\ncached_last_prefetch_success \(ok)\n"
        }
        if let warnings = s["feed_warnings"]?.array {
            out += "# HELP cached_feed_incomplete Whether the feed's last refresh ended at a page that has more than the settings follow (1: see status feed_warnings).\n"
            out += "# TYPE cached_feed_incomplete gauge\n"
            for (feed, prefix) in [("posts", "posts page "), ("images", "images page ")] {
                let incomplete = warnings.contains { $0.string?.hasPrefix(prefix) == true }
                out += "cached_feed_incomplete{feed=\"\(feed)\"} \(incomplete ? 1 : 0)\n"
            }
        }
        out += scrub(s["scrub"])
        return out
    }

    /// The scrub's lines: its state, what it checked and found since the
    /// daemon started (counters), when the last pass ended and what it found.
    static func scrub(_ scrub: JSON?) -> String {
        guard let scrub, let state = scrub["state"]?.string else { return "" }
        var out = "# HELP cached_scrub_state The scrub's state (1 for the state it is in).\n# TYPE cached_scrub_state gauge\n"
        for s in ["off", "idle", "running"] { out += "cached_scrub_state{state=\"\(s)\"} \(s == state ? 1 : 0)\n" }
        func metric(_ name: String, _ type: String, _ help: String, _ value: JSON?) {
            guard let v = value?.integer else { return }
            out += "# HELP cached_scrub_\(name) \(help)\n# TYPE cached_scrub_\(name) \(type)\ncached_scrub_\(name) \(v)\n"
        }
        let total = scrub["since_start"]
        metric("objects_checked_total", "counter", "Objects the scrub hashed since the daemon started.", total?["objects"])
        metric("bytes_checked_total", "counter", "Bytes the scrub hashed since the daemon started.", total?["bytes"])
        if let total {
            out += "# HELP cached_scrub_findings_total Objects the scrub found corrupt, unreadable or missing since the daemon started.\n"
            out += "# TYPE cached_scrub_findings_total counter\n"
            for kind in ["corrupt", "unreadable", "missing"] {
                out += "cached_scrub_findings_total{kind=\"\(kind)\"} \(total[kind]?.integer ?? 0)\n"
            }
        }
        if let last = scrub["last"], !last.isNull {
            metric("last_end_timestamp_seconds", "gauge", "When the last scrub pass ended (unix seconds).", last["ended"])
            let c = last["checked"]
            let found = ["corrupt", "unreadable", "missing"].reduce(Int64(0)) { $0 + (c?[$1]?.integer ?? 0) }
            metric("last_objects_checked", "gauge", "Objects the last scrub pass checked.", c?["objects"])
            metric("last_findings", "gauge", "Objects the last scrub pass found corrupt, unreadable or missing.", .number(String(found)))
        }
        if let pass = scrub["pass"], !pass.isNull {
            metric("pass_objects", "gauge", "Objects the scrub pass under way covers.", pass["objects"])
            metric("pass_objects_checked", "gauge", "Objects the scrub pass under way has checked.", pass["checked"]?["objects"])
        }
        metric("next_start_timestamp_seconds", "gauge", "When the next scrub pass starts (unix seconds).", scrub["next_start"])
        return out
    }
}
