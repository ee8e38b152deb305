import Testing
@_spi(Harness) @testable import CacheDaemon

/// Store paths are left out of HTTP answers (docs/http.md, `http-show-paths`):
/// every absolute path in a message becomes `<path>`, URLs keep theirs.
@Suite struct HTTPPathsTests {
    @Test(arguments: [
        ("store I/O failed: open(/var/cache/cached/objects/ab/cd): Too many open files (errno 24)",
         "store I/O failed: open(<path>): Too many open files (errno 24)"),
        ("object ab was corrupt; moved to /var/cache/cached/quarantine/ab-1 and downloading again",
         "object ab was corrupt; moved to <path> and downloading again"),
        ("cannot write \"/srv/store/tmp/1.part\", '/srv/x'; path=/srv/y, done", "cannot write \"<path>\", '<path>'; path=<path>, done"),
        ("/at/the/start: no", "<path> no"),
        ("origin http://example.org/images/a.png answered 404", "origin http://example.org/images/a.png answered 404"),
        ("a/relative/name and 1/2 of it", "a/relative/name and 1/2 of it"),
    ])
    func absolutePathsAreHidden(_ message: String, _ shown: String) {
        #expect(HTTPFrontEnd.withoutPaths(message) == shown)
    }
}
