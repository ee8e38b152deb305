import Testing
import CacheProtocol

/// The Prometheus text of a status (cachectl metrics and /metrics) from
/// whatever a daemon answers: a value out of range is left out, never trapped on.
@Suite struct MetricsTextTests {
    func status(finished: String) throws -> JSON {
        try JSONParser.parse(Array(#"{"ok":true,"posts":1,"counters":{},"last_prefetch":{"started":1,"finished":\#(finished),"succeeded":true}}"#.utf8))
    }

    @Test func aLastPrefetchTimeIsWholeSeconds() throws {
        let text = MetricsText.render(try status(finished: "1764633600.75"))
        #expect(text.contains("\ncached_last_prefetch_timestamp_seconds 1764633600\n"), "\(text)")
        #expect(text.contains("\ncached_last_prefetch_success 1\n"))
    }

    @Test func aTimeOutOfRangeIsLeftOut() throws {
        for bad in ["1e300", "-5", "9.3e18"] {
            let text = MetricsText.render(try status(finished: bad))
            #expect(!text.contains("cached_last_prefetch_timestamp_seconds "), "\(bad): \(text)")
        }
    }

    /// Issue 26: the variants stored and their three counters.
    @Test func variantsAreGaugesAndCounters() throws {
        let s = try JSONParser.parse(Array(#"{"ok":true,"variants":12,"counters":{"variants_made":12,"variant_hits":40,"variant_failures":2}}"#.utf8))
        let text = MetricsText.render(s)
        for line in ["# TYPE cached_variants gauge\ncached_variants 12\n", "# TYPE cached_variants_made_total counter\ncached_variants_made_total 12\n",
                     "cached_variant_hits_total 40\n", "cached_variant_failures_total 2\n"] {
            #expect(text.contains(line), "\(line) in \(text)")
        }
        #expect(!MetricsText.render(try JSONParser.parse(Array(#"{"ok":true,"counters":{}}"#.utf8))).contains("variant"), "an older daemon's: none")
    }
}
