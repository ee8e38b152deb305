import Testing
import CacheProtocol
@testable import CachedClient

/// The library's types decoded from the daemon's JSON, without a daemon.
@Suite struct ModelTests {
    func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try JSONTreeDecoder.decode(type, from: try JSONParser.parse(Array(text.utf8)))
    }

    @Test func aPostMapsUserIdAndKeepsWhatItDoesNotName() throws {
        let p = try decode(Post.self, #"{"userId":3,"id":21,"title":"t","body":"b\nc","tags":["x"],"score":1.5,"draft":false}"#)
        #expect(p.id == 21 && p.userID == 3 && p.title == "t" && p.body == "b\nc")
        #expect(p.extra == ["tags": .array([.string("x")]), "score": .number(1.5), "draft": .bool(false)])
        let bare = try decode(Post.self, #"{"id":1}"#)
        #expect(bare.userID == nil && bare.title == nil && bare.body == nil && bare.extra.isEmpty)
        // The feed may send them of any type (docs/protocol.md, "Feeds"): kept in extra.
        let odd = try decode(Post.self, #"{"id":2,"userId":"7","title":null,"body":["x"]}"#)
        #expect(odd.userID == nil && odd.title == nil && odd.body == nil)
        #expect(odd.extra == ["userId": .string("7"), "body": .array([.string("x")])])
        #expect(throws: (any Error).self) { try decode(Post.self, #"{"title":"no id"}"#) }
        #expect(try decode(Post.self, #"{"id":"a/1"}"#).id == .string("a/1"), "a string id (docs/protocol.md, \"Post ids\")")
        #expect(throws: (any Error).self) { try decode(Post.self, #"{"id":""}"#) }
        #expect(throws: (any Error).self) { try decode(Post.self, #"{"id":1.5}"#) }
    }

    @Test func rowsStatusAndSummariesDecode() throws {
        let cached = try decode(ImageRow.self, #"{"row":2,"url":"http://o/a.png","description":"A","hash":"00112233445566778899aabbccddeeff","size":10,"type":"image/png","path":"/s/objects/00/1122"}"#)
        #expect(cached.isCached && cached.size == 10 && cached.type == "image/png")
        let not = try decode(ImageRow.self, #"{"row":3,"url":"","description":null,"hash":null,"size":null,"type":null,"path":null}"#)
        #expect(!not.isCached && not.description == nil)
        let s = try decode(Status.self, #"{"ok":true,"posts":1,"images":2,"images_cached":1,"objects":1,"bytes":5,"max_bytes":0,"uptime_s":7,"counters":{"hits":3,"misses":1},"version":"0.1.0","store":"/s","socket":"/k","log_records":9}"#)
        #expect(s.imagesCached == 1 && s.uptimeSeconds == 7 && s.counters["hits"] == 3 && s.logRecords == 9)
        let summary = try decode(PrefetchSummary.self, #"{"ok":true,"posts":null,"images":{"downloaded":1,"cached":2,"failed":1,"bytes":3},"failures":[{"row":4,"url":"u","error":"e"}]}"#)
        #expect(summary.posts == nil && summary.images?.cached == 2 && summary.failures.first?.row == 4)
    }

    /// Issue 24: a row's last error, the revalidation counts and status's last
    /// prefetch; an older daemon's answers (none of them) still decode.
    @Test func lastErrorsCountsAndTheLastPrefetchDecode() throws {
        let failed = try decode(ImageRow.self, #"{"row":3,"url":"u","description":null,"hash":null,"size":null,"type":null,"path":null,"last_error":{"time":1764628800.5,"reason":"HTTP 404 Not Found","status":404}}"#)
        #expect(failed.lastError == ImageRow.RowError(time: 1764628800.5, reason: "HTTP 404 Not Found", status: 404))
        let html = try decode(ImageRow.self, #"{"row":3,"url":"u","description":null,"hash":null,"size":null,"type":null,"path":null,"last_error":{"time":1,"reason":"not an image","status":null}}"#)
        #expect(html.lastError?.status == nil && html.lastError?.reason == "not an image")
        let old = try decode(PrefetchSummary.self, #"{"ok":true,"posts":null,"images":{"downloaded":1,"cached":2,"failed":1,"bytes":3},"failures":[]}"#)
        #expect(old.images?.revalidated == 0 && old.images?.transfers == 0)
        let new = try decode(PrefetchSummary.self, #"{"ok":true,"posts":null,"images":{"downloaded":3,"cached":2,"revalidated":5,"changed":1,"unchanged":4,"failed":0,"skipped":2,"transfers":7,"bytes":3},"failures":[]}"#)
        #expect(new.images?.changed == 1 && new.images?.unchanged == 4 && new.images?.skipped == 2 && new.images?.transfers == 7)
        let base = #""posts":1,"images":2,"images_cached":1,"objects":1,"bytes":5,"max_bytes":0,"uptime_s":7,"counters":{},"version":"0.2.0","store":"/s","socket":"/k","log_records":9"#
        #expect(try decode(Status.self, "{" + base + "}").lastPrefetch == nil)
        #expect(try decode(Status.self, "{" + base + #","last_prefetch":null}"#).lastPrefetch == nil)
        let ran = try decode(Status.self, "{" + base + #","last_prefetch":{"started":10.25,"finished":12.5,"succeeded":true,"summary":{"posts":null,"images":{"downloaded":1,"cached":0,"revalidated":0,"changed":0,"unchanged":0,"failed":0,"skipped":0,"transfers":1,"bytes":9}},"error":null}}"#)
        #expect(ran.lastPrefetch?.succeeded == true && ran.lastPrefetch?.finished == 12.5 && ran.lastPrefetch?.summary?.images?.transfers == 1)
        let failedRun = try decode(Status.self, "{" + base + #","last_prefetch":{"started":1,"finished":2,"succeeded":false,"summary":null,"error":"posts-url: HTTP 500"}}"#)
        #expect(failedRun.lastPrefetch?.succeeded == false && failedRun.lastPrefetch?.summary == nil && failedRun.lastPrefetch?.error == "posts-url: HTTP 500")
    }

    /// Issue 26: a row with its variant, status's variants; an older daemon's (none) still decode.
    @Test func variantsDecode() throws {
        let row = try decode(ImageRow.self, #"{"row":3,"url":"u","description":null,"hash":"aa","size":9,"type":"image/png","path":"/p","last_error":null,"variant":{"hash":"bb","size":4,"type":"image/webp","path":"/v","width":96,"height":54}}"#)
        #expect(row.variant == ImageRow.Variant(hash: "bb", size: 4, type: "image/webp", path: "/v", width: 96, height: 54))
        let http = try decode(ImageRow.self, #"{"row":3,"url":"u","description":null,"hash":"aa","size":9,"type":"image/png","last_error":null,"variant":{"hash":"bb","size":4,"type":"image/webp","width":96,"height":54}}"#)
        #expect(http.variant?.path == nil && http.variant?.width == 96)
        let base = #""posts":1,"images":2,"images_cached":1,"objects":1,"bytes":5,"max_bytes":0,"uptime_s":7,"version":"0.2.0","store":"/s","socket":"/k","log_records":9"#
        let s = try decode(Status.self, "{" + base + #","counters":{"variants_made":2,"variant_hits":5,"variant_failures":1},"variants":2}"#)
        #expect(s.variants == 2 && s.counters["variant_hits"] == 5)
        #expect(try decode(Status.self, "{" + base + #","counters":{}}"#).variants == nil)
    }

    /// Issue 25: status's scrub; an older daemon's status (none) still decodes.
    @Test func theScrubDecodes() throws {
        let base = #""posts":1,"images":2,"images_cached":1,"objects":1,"bytes":5,"max_bytes":0,"uptime_s":7,"counters":{},"version":"0.2.0","store":"/s","socket":"/k","log_records":9"#
        #expect(try decode(Status.self, "{" + base + "}").scrub == nil)
        let counts = #"{"objects":7,"bytes":700,"corrupt":1,"unreadable":0,"missing":2}"#
        let s = try decode(Status.self, "{" + base + #","scrub":{"state":"running","interval_s":604800,"rate":8388608,"#
                           + #""pass":{"started":100,"position":"00112233445566778899aabbccddeeff","objects":15,"bytes":1500,"checked":\#(counts)},"#
                           + #""last":{"started":1,"ended":9,"checked":\#(counts)},"next_start":null,"since_start":\#(counts)}}"#)
        let scrub = try #require(s.scrub)
        #expect(scrub.state == "running" && scrub.intervalSeconds == 604800 && scrub.rate == 8 << 20 && scrub.nextStart == nil)
        #expect(scrub.pass?.objects == 15 && scrub.pass?.checked.objects == 7 && scrub.pass?.position == "00112233445566778899aabbccddeeff")
        #expect(scrub.last?.ended == 9 && scrub.last?.checked.missing == 2 && scrub.sinceStart.corrupt == 1)
    }

    @Test func errorAnswersKeepTheDaemonsCode() {
        let e = CachedError(answer: .object([("ok", .bool(false)), ("error", .object([("code", .string("not_cached")), ("message", .string("row 3 is not cached"))]))]))
        #expect(e?.code == .daemon(.notCached) && e?.message == "row 3 is not cached")
        #expect(CachedError(answer: .object([("ok", .bool(true))])) == nil)
        // A code the client keeps for itself cannot come from the daemon.
        let forged = CachedError(answer: .object([("ok", .bool(false)), ("error", .object([("code", .string("cancelled"))]))]))
        #expect(forged?.code == .daemon(.internal))
        let unknown = CachedError(answer: .object([("ok", .bool(false)), ("error", .object([("code", .string("from_a_later_daemon"))]))]))
        #expect(unknown?.code == .daemon(.internal))
    }

    /// The daemon's codes are the wire's (`ErrorCode`, the one list), each
    /// kept as it came and named as it is sent; the client's own have
    /// names no wire code has.
    @Test func everyWireCodeHasTheClientsCodeOfItsName() {
        for wire in ErrorCode.allCases {
            let e = CachedError(answer: .object([("ok", .bool(false)), ("error", .object([("code", .string(wire.rawValue))]))]))
            #expect(e?.code == .daemon(wire))
            #expect(e?.code.name == wire.rawValue)
        }
        let own: [CachedError.Code] = [.unavailable, .timedOut, .malformed, .cancelled]
        #expect(own.map(\.name) == ["unavailable", "timedOut", "malformed", "cancelled"])
        #expect(own.allSatisfy { ErrorCode(rawValue: $0.name) == nil })
        #expect("\(CachedError(.daemon(.notFound), "no post 5"))" == "no post 5 (not_found)")
    }
}
