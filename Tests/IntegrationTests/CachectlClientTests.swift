import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// cachectl as a client: negative post ids on the command line.
/// The real cachectl, against a real daemon.
@Suite struct CachectlClientTests {
    // MARK: ids that look like options

    @Test func negativeAndZeroPostIdsAreIdsNotOptions() throws {
        let origin = try Origin()
        try origin.write("posts.json", #"""
            [{"userId": 1, "id": -5, "title": "minus five", "body": "m"},
             {"userId": 2, "id": 0, "title": "zero", "body": "z"},
             {"userId": 3, "id": 7, "title": "seven", "body": "s"}]
            """#)
        let daemon = try Daemon(origin: origin)
        let s = daemon.socket
        let prefetch = try cachectl(["prefetch", "posts"], socket: s)
        #expect(prefetch.status == 0, "\(prefetch.stderr)")

        let minusFive = try cachectl(["get", "post", "-5"], socket: s)
        #expect(minusFive.status == 0, "\(minusFive.stderr)")
        #expect(minusFive.stdout.hasPrefix("Post -5 by user 1\nTitle: minus five\n"), "\(minusFive.stdout)")
        let zero = try cachectl(["get", "post", "0"], socket: s)
        #expect(zero.status == 0, "\(zero.stderr)")
        #expect(zero.stdout.hasPrefix("Post 0 by user 2\nTitle: zero\n"), "\(zero.stdout)")

        // Options still work before and after the id; `--` ends the options.
        for args in [["--json", "get", "post", "-5"], ["get", "post", "-5", "--json"], ["--json", "get", "post", "--", "-5"],
                     ["--json", "--", "get", "post", "-5"]] {
            let r = try cachectl(args, socket: s)
            #expect(r.status == 0, "\(args): \(r.stderr)")
            let answer = try JSONParser.parse(Array(r.stdout.utf8.dropLast()))
            #expect(answer["post"]?["id"] == .number("-5") && answer["post"]?["title"] == .string("minus five"), "\(args): \(r.stdout)")
        }
        // A negative id the feed does not have is not found, not a usage error.
        let missing = try cachectl(["get", "post", "-6"], socket: s)
        #expect(missing.status == 4, "\(missing.stderr)")
        #expect(missing.stderr.contains("post -6 not found"), "\(missing.stderr)")
        // A negative row is a number too, and says why it is refused.
        let row = try cachectl(["get", "image", "-1"], socket: s)
        #expect(row.status == 2)
        #expect(row.stderr == "cachectl: row must be a non-negative integer, not \"-1\"\n", "\(row.stderr)")

        // Unknown options are still errors, a number-like one too where no number is due.
        let unknown: [([String], String)] = [
            (["get", "post", "1", "-x"], "-x"), (["-5", "status"], "-5"), (["get", "posts", "-5"], "-5"),
            (["--bogus", "get", "post", "-5"], "--bogus"), (["get", "post", "-5x"], "-5x"),
        ]
        for (args, option) in unknown {
            let r = try cachectl(args, socket: s)
            #expect(r.status == 2, "\(args): \(r.stderr)")
            #expect(r.stderr == "cachectl: unknown option \(option) (see cachectl --help)\n", "\(args): \(r.stderr)")
        }
    }
}
