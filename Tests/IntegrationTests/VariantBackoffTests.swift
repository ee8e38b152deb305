#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// One bad image must not hold the helpers (issue 33, point 5): a failure
/// that is the original's is remembered for the original, so that its other
/// variants fail at once; variants of it asked at once wait for the one
/// being made; and an original that failed before never takes the last
/// helper (docs/operations.md, "Image variants"). The real daemon and its
/// real helpers, the hostile image a scaled-down one: an interlaced PNG of
/// 9000 x 9000 pixels, which a helper decodes whole (about a second of
/// CPU), against `variant-timeout 0.2`, or killed or stopped by the test.
/// Decodes are counted (`variant_jobs`, the log), never timed.
@Suite(.serialized) struct VariantBackoffTests {
    static let widths = [64, 96, 128, 160, 192, 256]

    /// An interlaced PNG of 9000 x 9000 pixels of one `shade`.
    static func slowPNG(shade: Int, in scratch: Scratch) throws -> [UInt8] {
        try VariantTests.made([["black", "DIR/b.v", "9000", "9000", "--bands", "3"],
                               ["linear", "DIR/b.v", "DIR/s.v", "1", "\(shade)", "--uchar"],
                               ["pngsave", "DIR/s.v", "DIR/slow.png", "--interlace"]], "slow.png", in: scratch)
    }

    /// `get_image` for each of `requests` at once, each on a connection of its own; their answers in order.
    static func atOnce(_ daemon: Daemon, _ requests: [[(String, JSON)]]) -> [JSON] {
        let answers = Locked([JSON?](repeating: nil, count: requests.count))
        let socket = daemon.socket
        let threads = requests.enumerated().map { i, request in
            Thread {
                let answer = (try? Client(socketPath: socket).call("get_image", request)) ?? .null
                answers.withLock { $0[i] = answer }
            }
        }
        for t in threads { t.start() }
        _ = waitUntil(60) { answers.withLock { $0.allSatisfy { $0 != nil } } }
        return answers.withLock { $0.map { $0 ?? .null } }
    }

    static func jobs(_ daemon: Daemon) throws -> Int? { try daemon.call("status")["counters"]?["variant_jobs"]?.int }

    /// Six widths of one original that no helper decodes in time, asked at
    /// once: one decode, and all six get the same error, which says it is
    /// remembered for the image. A seventh width later, or another row with
    /// the same bytes, fails at once with no job; new bytes at the row are
    /// tried again, and made.
    @Test func sixWidthsOfAnOriginalThatTimesOutCostOneDecode() throws {
        let scratch = Scratch()
        let slow = try Self.slowPNG(shade: 0, in: scratch)
        let nginx = try VariantTests.origin([("slow.png", slow), ("same.png", slow)])
        let daemon = try VariantTests.daemon(nginx, ["--variant-timeout", "0.2"])
        for row in [16, 17] { #expect(try daemon.call("get_image", [("row", num(row))])["image"] != nil) }
        let answers = Self.atOnce(daemon, Self.widths.map { [("row", num(16)), VariantTests.variant([("w", num($0))])] })
        let messages = answers.map { $0["error"]?["message"]?.string ?? "\($0)" }
        for m in messages {
            #expect(m.contains("took longer than variant-timeout") && m.contains("remembered for this image"), "\(m)")
        }
        #expect(Set(messages.map { $0.replacingOccurrences(of: #"row 16 variant [^:]*: "#, with: "", options: .regularExpression) }).count == 1,
                "the same error for every width: \(messages)")
        #expect(try Self.jobs(daemon) == 1, "one decode for six widths")
        #expect(daemon.log.components(separatedBy: "during a job").count - 1 == 1, "one helper stopped: \(daemon.log)")

        for (row, width) in [(16, 300), (17, 64)] {
            let again = try daemon.call("get_image", [("row", num(row)), VariantTests.variant([("w", num(width))])])
            #expect(again["error"]?["message"]?.string?.contains("remembered for this image") == true, "row \(row): \(again)")
        }
        #expect(try Self.jobs(daemon) == 1, "nothing decoded again, not for another row with the same bytes")

        // New bytes at row 16: a new original, tried at once.
        try Self.replace(row: 16, with: "01-sunrise.png", nginx, daemon)
        let made = try daemon.call("get_image", [("row", num(16)), VariantTests.variant([("w", num(64))])])
        #expect(made["image"]?["variant"]?["width"]?.int == 64, "\(made)")
        #expect(try Self.jobs(daemon) == 2)
    }

    /// Points `row` of the manifest at `file` and has the daemon fetch it.
    static func replace(row: Int, with file: String, _ nginx: Nginx, _ daemon: Daemon) throws {
        guard let files = nginx.files else { throw HarnessError("nginx has no files") }
        var manifest = try JSONParser.parse(files.bytes("images/manifest.json")).array ?? []
        manifest[row] = .object([("url", .string(file)), ("description", .string("row \(row), new bytes"))])
        try Data(JSON.array(manifest).encoded).write(to: URL(fileURLWithPath: files.root + "/images/manifest.json"))
        #expect(try daemon.call("prefetch", [("what", .string("images"))])["ok"] == .bool(true))
    }

    /// With two helpers, two originals that failed before (the helper
    /// killed on each; `variant-retry-after 0`, so that they are tried again
    /// at once) asked again at once: one takes a helper, which the test
    /// stops mid-decode; the other waits, and a small image's thumbnail
    /// asked after both is made by the helper kept for originals with no
    /// failure on record, while both are still unanswered. Before, the
    /// second took that helper and the thumbnail waited behind it.
    @Test func aSmallImageIsNotHeldBehindOriginalsThatFailedBefore() throws {
        let scratch = Scratch()
        let nginx = try VariantTests.origin([("a.png", try Self.slowPNG(shade: 0, in: scratch)),
                                             ("b.png", try Self.slowPNG(shade: 1, in: scratch))])
        let daemon = try VariantTests.daemon(nginx, ["--variant-helpers", "2", "--variant-retry-after", "0"])
        for row in [2, 16, 17] { #expect(try daemon.call("get_image", [("row", num(row))])["image"] != nil) }
        for row in [16, 17] {
            let pending = Pending(daemon, [("row", num(row)), VariantTests.variant([("w", num(64))])])
            let helper = try #require(Self.decodingHelper(of: daemon.pid), "a helper decoding row \(row)")
            kill(helper, SIGKILL)
            #expect(pending.answer()?["error"]?["message"]?.string?.contains("killed") == true, "row \(row)")
        }
        let first = Pending(daemon, [("row", num(16)), VariantTests.variant([("w", num(96))])])
        let busy = try #require(Self.decodingHelper(of: daemon.pid), "a helper decoding row 16 again")
        kill(busy, SIGSTOP)
        defer { kill(busy, SIGKILL) }
        let second = Pending(daemon, [("row", num(17)), VariantTests.variant([("w", num(96))])])
        #expect(waitUntil(20) { (try? Self.jobs(daemon)) == 4 }, "both jobs queued")
        let small = Pending(daemon, [("row", num(2)), VariantTests.variant([("w", num(32))])])
        let thumbnail = small.answer()
        #expect(thumbnail?["image"]?["variant"]?["width"]?.int == 32, "\(String(describing: thumbnail))")
        #expect(!first.answered && !second.answered, "the thumbnail was made while both waited")
        #expect(try Self.jobs(daemon) == 5)
    }

    /// A helper of `daemon` decoding a slow PNG: its resident memory past
    /// 150 MiB (a helper holds about 75 MiB idle; the decode, 243 MB).
    static func decodingHelper(of daemon: Int32) -> Int32? {
        var found: Int32?
        _ = waitUntil(20) {
            found = VariantTests.helpers(of: daemon).first { (VariantHelperTests.statusField($0, "VmRSS") ?? 0) > 150 << 20 }
            return found != nil
        }
        return found
    }
}

/// A `get_image` asked on a thread of its own; its answer once it comes.
final class Pending: Sendable {
    private let result = Locked<JSON?>(nil)

    init(_ daemon: Daemon, _ request: [(String, JSON)]) {
        let socket = daemon.socket
        let result = self.result
        Thread {
            let answer = (try? Client(socketPath: socket).call("get_image", request)) ?? .null
            result.withLock { $0 = answer }
        }.start()
    }

    var answered: Bool { result.withLock { $0 != nil } }

    /// The answer, waited for up to 60 s (nil if none came).
    func answer() -> JSON? {
        _ = waitUntil(60) { answered }
        return result.withLock { $0 }
    }
}
