import Testing
import CacheProtocol

/// The scrub's lines of the Prometheus text (docs/http.md, "Metrics").
@Suite struct ScrubMetricsTests {
    static let counts = #"{"objects":15,"bytes":25000,"corrupt":1,"unreadable":2,"missing":0}"#

    func render(_ scrub: String) throws -> String {
        MetricsText.render(try JSONParser.parse(Array(#"{"ok":true,"counters":{},"scrub":\#(scrub)}"#.utf8)))
    }

    @Test func anIdleScrubShowsItsLastPassAndItsCounters() throws {
        let text = try render(#"{"state":"idle","interval_s":604800,"rate":8388608,"pass":null,"#
                              + #""last":{"started":100,"ended":160,"checked":\#(Self.counts)},"next_start":604900,"since_start":\#(Self.counts)}"#)
        for line in ["cached_scrub_state{state=\"off\"} 0", "cached_scrub_state{state=\"idle\"} 1", "cached_scrub_state{state=\"running\"} 0",
                     "cached_scrub_objects_checked_total 15", "cached_scrub_bytes_checked_total 25000",
                     "cached_scrub_findings_total{kind=\"corrupt\"} 1", "cached_scrub_findings_total{kind=\"unreadable\"} 2",
                     "cached_scrub_findings_total{kind=\"missing\"} 0", "cached_scrub_last_end_timestamp_seconds 160",
                     "cached_scrub_last_objects_checked 15", "cached_scrub_last_findings 3", "cached_scrub_next_start_timestamp_seconds 604900"] {
            #expect(text.contains("\n" + line + "\n"), "\(line) in \(text)")
        }
        #expect(text.contains("# TYPE cached_scrub_findings_total counter\n"))
        #expect(!text.contains("cached_scrub_pass_"))
    }

    @Test func aRunningScrubShowsItsPassAndNoNextStart() throws {
        let text = try render(#"{"state":"running","interval_s":60,"rate":1024,"pass":{"started":5,"position":null,"objects":15,"bytes":25000,"#
                              + #""checked":\#(Self.counts)},"last":null,"next_start":null,"since_start":\#(Self.counts)}"#)
        #expect(text.contains("\ncached_scrub_state{state=\"running\"} 1\n"))
        #expect(text.contains("\ncached_scrub_pass_objects 15\n") && text.contains("\ncached_scrub_pass_objects_checked 15\n"))
        #expect(!text.contains("cached_scrub_last_") && !text.contains("cached_scrub_next_start"), "\(text)")
    }

    @Test func aDaemonWithoutAScrubHasNoScrubLines() throws {
        let text = MetricsText.render(try JSONParser.parse(Array(#"{"ok":true,"counters":{}}"#.utf8)))
        #expect(!text.contains("cached_scrub"))
    }
}
