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
}
