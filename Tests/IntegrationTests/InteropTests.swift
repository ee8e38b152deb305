import Foundation
import Testing
import CacheProtocol

/// More real servers (issue 10): Apache with mod_deflate, lighttpd, and
/// squid as a forward proxy in front of nginx. `make interop` runs these
/// (and RealOriginTests); `make test` skips them.
@Suite struct InteropTests {
    /// With DeflateAlterETag Remove, a compressed answer carries no ETag
    /// and revalidation goes by Last-Modified: 304s.
    @Test func apacheWithModDeflateRevalidatesByLastModified() throws {
        let apache = try Apache(deflateAlterETag: "Remove")
        try RefreshScenario(name: apache.name, files: apache.files, postsURL: apache.postsURL, manifestURL: apache.manifestURL,
                            log: apache.accessLog, stop: { apache.stop() }, proto: "HTTP/1.1").run()
    }

    /// mod_deflate's default (DeflateAlterETag AddSuffix) sends `"…-gzip"`
    /// ETags and then does not match them in If-None-Match (Apache bug
    /// 45023), and RFC 9110 has If-Modified-Since ignored when If-None-Match
    /// is present: the first revalidation gets the whole feed with 200 and
    /// the same ETag. cached notices and from then on sends If-Modified-Since
    /// alone for that feed, which Apache answers 304.
    @Test func apacheWithModDeflateDefaultsRevalidatesByLastModifiedOnceItsETagFails() throws {
        let apache = try Apache()
        try RefreshScenario(name: apache.name, files: apache.files, postsURL: apache.postsURL, manifestURL: apache.manifestURL,
                            log: apache.accessLog, stop: { apache.stop() }, proto: "HTTP/1.1", ignoresItsOwnETags: true).run()
    }

    @Test func lighttpdWithModDeflate() throws {
        let lighttpd = try Lighttpd()
        try RefreshScenario(name: "lighttpd", files: lighttpd.files, postsURL: lighttpd.postsURL, manifestURL: lighttpd.manifestURL,
                            log: lighttpd.accessLog, stop: { lighttpd.stop() }, proto: "HTTP/1.1").run()
    }

    /// cached --proxy squid, squid in front of nginx: squid's log shows the
    /// daemon's requests and answers, nginx's log what squid asked.
    @Test func squidAsAForwardProxy() throws {
        let nginx = try Nginx()
        let squid = try Squid()
        try RefreshScenario(name: "squid", files: nginx.files!, postsURL: nginx.postsURL, manifestURL: nginx.manifestURL,
                            daemonArguments: ["--proxy", squid.proxyURL], log: squid.accessLog, stop: { squid.process.stop() },
                            proto: "1.1", gzip: false, logsValidators: false).run()
        nginx.stop()
        let origin = nginx.accessLog.entries()
        print("[real-origin] nginx behind squid: \(origin.count) requests: \(origin.map(\.description))")
        for p in try nginx.files!.allPaths() where !p.hasSuffix(".json") {
            #expect(origin.filter { $0.path == p }.map(\.status) == [200], "\(p) crossed the proxy once")
        }
        // squid revalidates every request (refresh_pattern 0 0% 0) with the validators it holds.
        #expect(origin.filter { $0.path == "/posts.json" }.map(\.status) == [200, 304, 304, 304, 200, 304])
        #expect(origin.filter { $0.path == "/images/manifest.json" }.map(\.status) == [200, 304, 304, 304, 304, 304])
        #expect(origin.filter { $0.status == 304 }.allSatisfy { $0.ifNoneMatch != nil }, "\(origin.map(\.line))")
        #expect(squid.accessLog.entries().allSatisfy { $0.cacheStatus?.hasSuffix("HIER_DIRECT") == true || $0.cacheStatus?.hasSuffix("HIER_NONE") == true })
    }
}
