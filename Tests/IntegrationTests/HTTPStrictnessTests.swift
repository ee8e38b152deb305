import Foundation
import Testing
import CacheProtocol

/// The smaller holes of issue 22, item 10, against the real daemon with curl:
/// huge range numbers, Hosts that are not a host and port, a request
/// without Host, repeated singleton fields, store paths in answers.
@Suite(.serialized) struct HTTPStrictnessTests {
    /// A range number of 19 or more digits is past any size, not unreadable.
    @Test func rangeNumbersOfManyDigitsSaturate() throws {
        let f = try HTTPFixture()
        let file = try f.nginx.files!.bytes(try f.nginx.files!.imageFiles()[3])
        let past = try f.curl(["-H", "Range: bytes=99999999999999999999-", f.base + "/images/3"])
        #expect(past.heads.hasPrefix("HTTP/1.1 416 ") && past.heads.contains("Content-Range: bytes */\(file.count)"), "\(past.heads)")
        let suffix = try f.curl(["-H", "Range: bytes=-99999999999999999999", f.base + "/images/3"])
        #expect(suffix.heads.hasPrefix("HTTP/1.1 206 ") && suffix.heads.contains("Content-Range: bytes 0-\(file.count - 1)/\(file.count)")
                && suffix.body == file, "\(suffix.heads)")
        let end = try f.curl(["-H", "Range: bytes=2-0000000000000000000000000005", f.base + "/images/3"])
        #expect(end.heads.hasPrefix("HTTP/1.1 206 ") && end.body == Array(file[2...5]), "leading zeros: \(end.heads)")
    }

    /// `[name]` is not an IPv6 literal, a port is digits, and a request
    /// without Host names no host this server answers for: over TCP and
    /// over the Unix socket alike.
    @Test func hostsThatAreNotAHostAndPortAndRequestsWithoutHostAreRefused() throws {
        let f = try HTTPFixture(prefetch: false)
        for via in [[f.base + "/healthz"], ["--unix-socket", f.httpSocket, "http://localhost/healthz"]] {
            for (host, status) in [("[evil.example]", 400), ("[evil.example]:\(f.port)", 400), ("127.0.0.1:junk", 400),
                                   ("127.0.0.1:99999", 400), ("localhost:", 400), ("[dead:beef::1:2:3:4:5:6:7]", 400),
                                   ("[::1]", 200), ("[::ffff:127.0.0.1]:\(f.port)", 200), ("127.0.0.1:\(f.port)", 200)] {
                let r = try f.curl(["-H", "Host: \(host)"] + via)
                #expect(r.heads.hasPrefix("HTTP/1.1 \(status) "), "Host \(host) via \(via[0]): \(r.heads)")
            }
            // curl -H "Host:" sends none.
            let none = try f.curl(["--http1.0", "-H", "Host:"] + via)
            #expect(none.heads.hasPrefix("HTTP/1.1 421 ") && String(decoding: none.body, as: UTF8.self).contains("Host"),
                    "HTTP/1.0 without Host via \(via[0]): \(none.heads)")
        }
    }

    /// Two Origins (or two Content-Types, If-Ranges) are refused, not read as the last one.
    @Test func aRepeatedSingletonFieldIsRefused() throws {
        let f = try HTTPFixture(prefetch: false, arguments: ["--http-allow-admin"])
        let origins = try f.curl(["-X", "POST", "-H", "Origin: http://evil.example", "-H", "Origin: http://127.0.0.1:\(f.port)",
                                  f.base + "/gc"])
        #expect(origins.heads.hasPrefix("HTTP/1.1 400 ") && String(decoding: origins.body, as: UTF8.self).contains("Origin"),
                "\(origins.heads)")
        let types = try f.curl(["-X", "POST", "-H", "Content-Type: text/plain", "-H", "Content-Type: application/json",
                                "--data-binary", "{}", f.base + "/gc"])
        #expect(types.heads.hasPrefix("HTTP/1.1 400 ") && String(decoding: types.body, as: UTF8.self).contains("Content-Type"),
                "\(types.heads)")
        let ifRange = try f.curl(["-H", "If-Range: \"a\"", "-H", "If-Range: \"b\"", f.base + "/healthz"])
        #expect(ifRange.heads.hasPrefix("HTTP/1.1 400 "), "\(ifRange.heads)")
        let one = try f.curl(["-X", "POST", "-H", "Origin: http://127.0.0.1:\(f.port)", f.base + "/gc"])
        #expect(one.heads.hasPrefix("HTTP/1.1 200 "), "\(one.heads)")
    }

    /// `/images` and error bodies over HTTP name no file of the store
    /// unless `http-show-paths` is set; the socket's `list_images` still does.
    @Test func storePathsAreLeftOutOfHTTPAnswersUnlessShown() throws {
        for show in [false, true] {
            let f = try HTTPFixture(arguments: ["--retries", "0"] + (show ? ["--http-show-paths"] : []))
            let store = f.daemon.store
            let images = try f.curl([f.base + "/images"])
            let rows = try JSONParser.parse(images.body).array ?? []
            try #require(rows.count == 16, "\(images.heads)")
            #expect(rows.allSatisfy { ($0["path"]?.string?.hasPrefix(store) ?? false) == show }, "show \(show): \(rows[3])")
            #expect(String(decoding: images.body, as: UTF8.self).contains(store) == show)
            // The JSON-lines socket's list_images keeps them: its clients are local users of the store.
            let listed = try f.daemon.call("list_images", [("limit", .number("1"))])
            #expect(listed["images"]?.array?.first?["path"]?.string?.hasPrefix(store) == true, "\(listed)")
            // A damaged object that cannot be fetched again: its 404 names the quarantine only when shown.
            let (image, path) = try f.daemon.prefetchedImage(row: 3)
            let good = try Data(contentsOf: URL(fileURLWithPath: path))
            try Data(good.map { $0 ^ 0x5A }).write(to: URL(fileURLWithPath: path))
            f.nginx.stop()
            let missing = try f.curl([f.base + "/objects/" + (image["hash"]?.string ?? "")])
            let text = String(decoding: missing.body, as: UTF8.self)
            #expect(missing.heads.hasPrefix("HTTP/1.1 404 ") && text.contains("failed verification"), "\(missing.heads)\(text)")
            #expect(text.contains(store + "/quarantine") == show && text.contains(store) == show, "show \(show): \(text)")
        }
    }
}
