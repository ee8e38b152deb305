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

    @Test func errorAnswersKeepTheDaemonsCode() {
        let e = CachedError(answer: .object([("ok", .bool(false)), ("error", .object([("code", .string("not_cached")), ("message", .string("row 3 is not cached"))]))]))
        #expect(e?.code == .notCached && e?.message == "row 3 is not cached")
        #expect(CachedError(answer: .object([("ok", .bool(true))])) == nil)
        // A code the client keeps for itself cannot come from the daemon.
        let forged = CachedError(answer: .object([("ok", .bool(false)), ("error", .object([("code", .string("cancelled"))]))]))
        #expect(forged?.code == .internal)
        let unknown = CachedError(answer: .object([("ok", .bool(false)), ("error", .object([("code", .string("from_a_later_daemon"))]))]))
        #expect(unknown?.code == .internal)
    }

    /// The daemon's codes are the wire's (`ErrorCode`), each under its own name.
    @Test func everyWireCodeHasTheClientsCodeOfItsName() {
        for wire in ErrorCode.allCases {
            #expect(CachedError.Code(rawValue: wire.rawValue) != nil, "\(wire.rawValue) has no CachedError.Code")
            let e = CachedError(answer: .object([("ok", .bool(false)), ("error", .object([("code", .string(wire.rawValue))]))]))
            #expect(e?.code.rawValue == wire.rawValue)
        }
    }
}
