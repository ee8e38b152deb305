import Testing
@testable import CacheProtocol
import CacheSystem

@Suite struct JSONParserTests {
    @Test func writtenLengthsAreCountedWithoutWriting() {
        for text in ["", "plain", "é and 日本", "\"quoted\" \\ back", "\n\r\t", "\u{0}\u{1}\u{1f}\u{7f}", String(repeating: "\u{2}", count: 100)] {
            var w = JSONWriter()
            w.string(text)
            #expect(JSONWriter.length(of: text) == w.bytes.count, "\(Array(text.utf8))")
        }
        for id: PostID in [.int(0), .int(9), .int(10), .int(-1), .int(-10), .int(123_456_789), .int(.max), .int(.min), .string("a\"b")] {
            var w = JSONWriter()
            w.postID(id)
            #expect(JSONWriter.length(of: id) == w.bytes.count, "\(id)")
        }
    }

    /// The writer's integers (and `get_post`'s id) skip `String(v)` but spell the same.
    @Test func integersAreWrittenAsStringSpellsThem() throws {
        var rng = SystemRandomNumberGenerator()
        let values: [Int64] = [0, 9, 10, -1, -9, -10, 99, 100, .max, .min, .max - 1, .min + 1] + (0..<1000).map { _ in Int64.random(in: .min ... .max, using: &rng) }
        for v in values {
            var w = JSONWriter()
            w.int(v)
            #expect(w.bytes == Array(String(v).utf8), "\(v)")
            let line = Response.ok(tag: nil, id: .int(v), name: "post", rawJSON: Array("{}".utf8))
            #expect(try JSONParser.parse(line.dropLast())["id"] == .number(String(v)))
        }
        var w = JSONWriter()
        w.int(UInt64.max)
        #expect(w.bytes == Array(String(UInt64.max).utf8))
    }

    @Test func parsesEveryKindOfValue() throws {
        let v = try JSONParser.parse(Array(#" {"a": [1, -2.5e3, true, false, null], "b": "x\"\u00e9\ud83d\ude00", "c": {}} "#.utf8))
        #expect(v["a"] == .array([.number("1"), .number("-2.5e3"), .bool(true), .bool(false), .null]))
        #expect(v["b"] == .string("x\"é😀"))
        #expect(v["c"] == .object([]))
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "1e", "tru", "nul", "\"abc", "\"\\x\"",
        "\"\u{01}\"", "{\"a\" 1}", "[1 2]", "{} {}", "\"\\ud800\"", "\"\\udc00x\"", "NaN", "+1", "'a'",
    ])
    func rejectsInvalidText(_ text: String) {
        #expect(throws: JSONError.self) { try JSONParser.parse(Array(text.utf8)) }
    }

    @Test func rejectsInvalidUTF8AndNulInStrings() {
        #expect(throws: JSONError.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONError.self) { try JSONParser.parse([0x22, 0x00, 0x22]) }
        #expect(throws: JSONError.self) { try JSONParser.parse([0x22, 0xFF, 0x22]) }
    }

    /// A number longer than the parser reads is refused saying so, with
    /// its length and the bound; one at the bound is read.
    @Test func longNumbersAreRefusedNamingTheBound() throws {
        let bound = JSONParser.maxNumberLength
        #expect(try JSONParser.parse(Array(String(repeating: "7", count: bound).utf8)) == .number(String(repeating: "7", count: bound)))
        do {
            _ = try JSONParser.parse(Array(("[" + String(repeating: "7", count: bound + 1) + "]").utf8))
            Issue.record("a number of \(bound + 1) characters was read")
        } catch {
            #expect(error.description.contains("a number of \(bound + 1) characters, more than the \(bound) this parser reads"), "\(error)")
        }
    }

    @Test func limitsNesting() throws {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        _ = try JSONParser.parse(Array(ok.utf8))
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONError.self) { try JSONParser.parse(Array(deep.utf8)) }
    }

    /// `validate` (what a feed's items are checked with, unbuilt) takes
    /// exactly what `parse` takes: the invalid texts above, the nesting
    /// bound, and mutations of a document with escapes, surrogates and
    /// multi-byte UTF-8, errors at the same byte.
    @Test func validateAgreesWithParse() {
        let invalid = ["", " ", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "1e", "tru", "nul", "\"abc", "\"\\x\"",
                       "\"\u{01}\"", "{\"a\" 1}", "[1 2]", "{} {}", "\"\\ud800\"", "\"\\udc00x\"", "NaN", "+1", "'a'"]
        var texts = invalid.map { Array($0.utf8) } + [[0x22, 0xC3, 0x28, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xC0, 0xAF, 0x22]]
        texts.append(Array((String(repeating: "[", count: 64) + String(repeating: "]", count: 64)).utf8))
        texts.append(Array((String(repeating: "[", count: 65) + String(repeating: "]", count: 65)).utf8))
        let seed = Array(#"[{"id":1,"t":"caf\u00e9 \ud83d\ude00 é😀 \"q\"\n","n":[-0.5e+3,true,null,{}]},{"id":"x/2","a":[]}]"#.utf8)
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]":,.-+0123456789eE tfnrulsa\u"#.utf8) + [0x00, 0x0A, 0x80, 0xC3, 0xE2, 0xED, 0xF0, 0xFF]
        for _ in 0..<20_000 {
            var text = seed
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let i = Int.random(in: 0..<text.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: text[i] = alphabet.randomElement(using: &rng)!
                case 1: text.insert(alphabet.randomElement(using: &rng)!, at: i)
                default: text.remove(at: i)
                }
            }
            texts.append(text)
        }
        for text in texts {
            var parsed: JSONError?, validated: JSONError?
            do throws(JSONError) { _ = try JSONParser.parse(text) } catch { parsed = error }
            do throws(JSONError) { try JSONParser.validate(text) } catch { validated = error }
            #expect(parsed == validated, "\(Array(text))")
        }
    }

    @Test func integersAreOnlyPlainWholeNumbersThatFit() {
        #expect(JSON.number("42").integer == 42)
        #expect(JSON.number("-7").integer == -7)
        #expect(JSON.number("1.0").integer == nil)
        #expect(JSON.number("1e2").integer == nil)
        #expect(JSON.number("99999999999999999999").integer == nil)
        #expect(JSON.string("1").integer == nil)
    }

    @Test func arrayElementsKeepTheirExactText() throws {
        let text = Array("[ {\"id\": 1,\n  \"x\": \"a b\"} , 2 ]".utf8)
        let ranges = try #require(try JSONParser.parseDocument(text, capturingArrayAt: []).ranges)
        #expect(ranges.count == 2)
        #expect(String(decoding: text[ranges[0]], as: UTF8.self) == "{\"id\": 1,\n  \"x\": \"a b\"}")
        #expect(String(decoding: JSONParser.minify(text[ranges[0]]), as: UTF8.self) == "{\"id\":1,\"x\":\"a b\"}")
    }

    @Test func minifyKeepsStringsAndEscapesIntact() {
        let text = #"{ "a" : "x \" y\\" , "b" : [ 1 , 2 ] }"#
        #expect(String(decoding: JSONParser.minify(Array(text.utf8)), as: UTF8.self) == #"{"a":"x \" y\\","b":[1,2]}"#)
    }

    @Test func writerEscapesControlCharacters() throws {
        let s = "line\nbreak \"quoted\" \\ \u{01} é"
        let encoded = JSON.string(s).encoded
        #expect(!encoded.contains(0x0A))
        #expect(try JSONParser.parse(encoded) == .string(s))
    }
}

@Suite struct RequestTests {
    private func parse(_ s: String) -> Result<Request, TaggedError> { Request.parse(Array(s.utf8)) }

    @Test func parsesEveryOp() throws {
        #expect(try parse(#"{"op":"ping"}"#).get().command == .ping)
        #expect(try parse(#"{"op":"status"}"#).get().command == .status)
        #expect(try parse(#"{"op":"get_post","id":7}"#).get().command == .getPost(id: .int(7)))
        #expect(try parse(#"{"op":"get_post","id":"7"}"#).get().command == .getPost(id: .string("7")))
        #expect(try parse(#"{"op":"get_post","id":"a\/b é"}"#).get().command == .getPost(id: .string("a/b é")))
        #expect(try parse(#"{"op":"list_posts"}"#).get().command == .listPosts(offset: 0, limit: nil))
        #expect(try parse(#"{"op":"list_posts","offset":5,"limit":2}"#).get().command == .listPosts(offset: 5, limit: 2))
        #expect(try parse(#"{"op":"list_posts","query":"Élan"}"#).get().command == .listPosts(offset: 0, limit: nil, query: "Élan"))
        #expect(try parse(#"{"op":"list_posts","query":""}"#).get().command == .listPosts(offset: 0, limit: nil), "empty: no query")
        #expect(try parse(#"{"op":"list_posts","query":null}"#).get().command == .listPosts(offset: 0, limit: nil))
        let longest = String(repeating: "é", count: 128)
        #expect(try parse(#"{"op":"list_posts","query":"\#(longest)"}"#).get().command == .listPosts(offset: 0, limit: nil, query: longest))
        for bad in [#"{"op":"list_posts","query":5}"#, #"{"op":"list_posts","query":"\#(longest)x"}"#] {
            guard case .failure(let e) = parse(bad) else { Issue.record("\(bad) was accepted"); continue }
            #expect(e.error.code == .badRequest && e.error.message.contains("256 bytes"), "\(e.error)")
        }
        #expect(try parse(#"{"op":"get_image","row":3}"#).get().command == .getImage(row: 3, fetch: true))
        #expect(try parse(#"{"op":"get_image","row":3,"fetch":false}"#).get().command == .getImage(row: 3, fetch: false))
        #expect(try parse(#"{"op":"get_image","row":3,"variant":{"w":96,"h":72,"fit":"cover","format":"avif"}}"#).get().command
                == .getImage(row: 3, fetch: true, variant: VariantRequest(width: 96, height: 72, fit: .cover, format: .avif)))
        #expect(try parse(#"{"op":"get_image","row":3,"variant":{}}"#).get().command == .getImage(row: 3, fetch: true, variant: VariantRequest()))
        #expect(try parse(#"{"op":"get_image","row":3,"variant":null}"#).get().command == .getImage(row: 3, fetch: true))
        #expect(try parse(#"{"op":"list_images","limit":1}"#).get().command == .listImages(offset: 0, limit: 1))
        #expect(try parse(#"{"op":"read","hash":"99aa06d3014798d86001c324468d497f"}"#).get().command == .read(hash: Hash128(hex: "99aa06d3014798d86001c324468d497f")!))
        #expect(try parse(#"{"op":"prefetch"}"#).get().command == .prefetch(what: .all, force: false, progress: false))
        #expect(try parse(#"{"op":"prefetch","what":"images","force":true,"progress":true}"#).get().command == .prefetch(what: .images, force: true, progress: true))
        #expect(try parse(#"{"op":"verify"}"#).get().command == .verify)
        #expect(try parse(#"{"op":"gc"}"#).get().command == .gc)
        #expect(try parse(#"{"op":"compact"}"#).get().command == .compact)
    }

    @Test(arguments: [
        #"{"op":"get_post"}"#, #"{"op":"get_post","id":""}"#, #"{"op":"get_post","id":1.5}"#,
        #"{"op":"get_post","id":null}"#, #"{"op":"get_post","id":[1]}"#, "{\"op\":\"get_post\",\"id\":\"\(String(repeating: "x", count: 1025))\"}",
        #"{"op":"get_image","row":-1}"#, #"{"op":"get_image"}"#, #"{"op":"get_image","row":1,"fetch":"no"}"#,
        #"{"op":"get_image","row":1,"variant":96}"#, #"{"op":"get_image","row":1,"variant":{"w":0}}"#,
        #"{"op":"get_image","row":1,"variant":{"w":65536}}"#, #"{"op":"get_image","row":1,"variant":{"h":1.5}}"#,
        #"{"op":"get_image","row":1,"variant":{"w":"96"}}"#, #"{"op":"get_image","row":1,"variant":{"fit":"fill"}}"#,
        #"{"op":"get_image","row":1,"variant":{"format":"gif"}}"#, #"{"op":"get_image","row":1,"variant":{"width":96}}"#,
        #"{"op":"list_posts","limit":-3}"#, #"{"op":"read","hash":"../../etc/passwd"}"#,
        #"{"op":"read","hash":"99AA06D3014798D86001C324468D497F"}"#, #"{"op":"read"}"#,
        #"{"op":"prefetch","what":"everything"}"#, #"{"op":"nope"}"#, #"{"op":1}"#, #"{}"#, "[]", "ping", "",
        #"{"op":"get_post","id":99999999999999999999999}"#,
    ])
    func rejectsBadRequests(_ line: String) {
        guard case .failure(let e) = parse(line) else { Issue.record("accepted \(line)"); return }
        #expect(e.error.code == .badRequest)
        #expect(!e.error.message.isEmpty)
    }

    @Test func tagIsEchoedVerbatimEvenOnErrors() throws {
        let ok = try parse(#"{"tag": {"k": [1, "two"]}, "op": "ping"}"#).get()
        #expect(ok.tag.map { String(decoding: $0, as: UTF8.self) } == #"{"k":[1,"two"]}"#)
        guard case .failure(let e) = parse(#"{"op":"get_post","tag":42}"#) else { Issue.record("accepted"); return }
        #expect(e.tag == Array("42".utf8))
        let line = String(decoding: Response.error(e.error, tag: e.tag), as: UTF8.self)
        #expect(line == #"{"ok":false,"tag":42,"error":{"code":"bad_request","message":"missing \"id\""}}"# + "\n")
    }

    @Test func responsesAreSingleLines() throws {
        let r = Response.ok(tag: nil) { $0.field("message", "a\nb") }
        #expect(r.last == 0x0A)
        #expect(r.dropLast().contains(0x0A) == false)
        #expect(try JSONParser.parse(r.dropLast())["message"] == .string("a\nb"))
    }
}

@Suite struct LineBufferTests {
    @Test func splitsLinesAcrossChunks() {
        var b = LineBuffer(limit: 100)
        b.append(Array("{\"a\":1}\n{\"b\"".utf8))
        #expect(b.nextLine() == .line(Array("{\"a\":1}".utf8)[...]))
        #expect(b.nextLine() == .incomplete)
        b.append(Array(":2}\r\n".utf8))
        #expect(b.nextLine() == .line(Array("{\"b\":2}".utf8)[...]))
        #expect(b.nextLine() == .incomplete)
    }

    @Test func refusesLinesPastTheLimitWithOrWithoutNewline() {
        var b = LineBuffer(limit: 10)
        b.append(Array(repeating: UInt8(ascii: "x"), count: 11))
        #expect(b.nextLine() == .tooLong)
        var c = LineBuffer(limit: 10)
        c.append(Array(repeating: UInt8(ascii: "x"), count: 10) + [0x0A])
        #expect(c.nextLine() == .line(Array(repeating: UInt8(ascii: "x"), count: 10)[...]))
    }
}

@Suite struct FastRequestTests {
    private static func fast(_ s: [UInt8]) -> Request? { s.withUnsafeBytes { FastRequest.parse($0) } }

    private static func agree(_ line: [UInt8]) -> Bool {
        guard let f = fast(line) else { return true }  // not taken: the general path decides
        guard case .success(let g) = Request.parseGeneral(line) else { return false }
        return f.command == g.command && f.tag == g.tag
    }

    @Test func takesTheHotRequestsAsClientsWriteThem() {
        #expect(Self.fast(Array(#"{"op":"get_post","id":7}"#.utf8))?.command == .getPost(id: 7))
        #expect(Self.fast(Array(#"{"op": "get_post", "id": 7}"#.utf8))?.command == .getPost(id: 7))
        #expect(Self.fast(Array(#"{"id":-3,"op":"get_post","tag":"x"}"#.utf8))?.tag == Array(#""x""#.utf8))
        #expect(Self.fast(Array(#"{"op":"get_image","row":2,"fetch":false}"#.utf8))?.command == .getImage(row: 2, fetch: false))
        #expect(Self.fast(Array(#"{"op":"ping","tag":12}"#.utf8))?.command == .ping)
        #expect(Self.fast(Array(#"{"op":"read","hash":"99aa06d3014798d86001c324468d497f"}"#.utf8))?.command == .read(hash: Hash128(hex: "99aa06d3014798d86001c324468d497f")!))
        #expect(Self.fast(Array(#"{"op":"read","hash":"99AA06D3014798D86001C324468D497F"}"#.utf8)) == nil)
        #expect(Self.fast(Array(#"{"op":"read","hash":"../../etc/passwd"}"#.utf8)) == nil)
        #expect(Self.fast(Array(#"{"op":"open","hash":"99aa06d3014798d86001c324468d497f","tag":3}"#.utf8))?.command == .open(hash: Hash128(hex: "99aa06d3014798d86001c324468d497f")!))
        #expect(Self.fast(Array(#"{"op":"open","hash":"99aa06d3"}"#.utf8)) == nil)
    }

    @Test(arguments: [
        #"{"op":"get_post","id":1.0}"#, #"{"op":"get_post","id":"1"}"#, #"{"op":"get_post"}"#, #"{"op":"get_post","id":01}"#,
        #"{"op":"get_post","id":99999999999999999999}"#, #"{"op":"get_image","row":-1}"#, #"{"op":"get_image","row":1,"fetch":1}"#,
        #"{"op":"g\u0065t_post","id":1}"#, #"{"op":"get_post","id":1,}"#, #"{"op":"get_post","id":1} x"#, #"{"op":"ping","tag":{"a":1}}"#,
        #"{"op":"prefetch"}"#, #"{"op":"get_post","id":1"#, "{}", "", #"{"op":"get_post" "id":1}"#,
    ])
    func leavesEverythingElseToTheGeneralParser(_ line: String) {
        #expect(Self.fast(Array(line.utf8)) == nil, "\(line)")
    }

    @Test func neverDisagreesWithTheGeneralParserOnMutatedLines() {
        let seeds = [#"{"op":"get_post","id":42,"tag":"t1"}"#, #"{"op": "get_image", "row": 3, "fetch": true}"#,
                     #"{"op":"ping"}"#, #"{"op":"status","tag":7}"#, #"{"tag":null,"op":"get_post","id":-9}"#,
                     #"{"op":"read","hash":"99aa06d3014798d86001c324468d497f"}"#,
                     #"{"op":"open","hash":"99aa06d3014798d86001c324468d497f","tag":[1]}"#]
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]":,.-+0123456789eE tfnrulsa\"#.utf8) + [0x00, 0x0A, 0xC3, 0xFF]
        var checked = 0
        for _ in 0..<20_000 {
            var line = Array(seeds.randomElement(using: &rng)!.utf8)
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let i = Int.random(in: 0..<line.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: line[i] = alphabet.randomElement(using: &rng)!
                case 1: line.insert(alphabet.randomElement(using: &rng)!, at: i)
                default: if line.count > 1 { line.remove(at: i) }
                }
            }
            if Self.fast(line) != nil { checked += 1 }
            #expect(Self.agree(line), "disagreement on \(String(decoding: line, as: UTF8.self))")
        }
        #expect(checked > 100, "the fast path took \(checked) of the mutated lines")
    }
}

extension Request: Equatable {
    public static func == (a: Request, b: Request) -> Bool { a.command == b.command && a.tag == b.tag }
}
