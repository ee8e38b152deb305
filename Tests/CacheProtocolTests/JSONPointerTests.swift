import Testing
import CacheProtocol

@Suite struct JSONPointerTests {
    let doc = try! JSONParser.parse(Array(#"{"foo":["bar","baz"],"":0,"a/b":1,"c%d":2,"e^f":3,"g|h":4,"i\\j":5,"k\"l":6," ":7,"m~n":8,"data":{"items":[{"id":1}]}}"#.utf8))

    /// RFC 6901 section 5's examples, in JSON String representation.
    @Test func theRFCExamplesNameWhatTheRFCSays() throws {
        let cases: [(String, JSON)] = [
            ("/foo", .array([.string("bar"), .string("baz")])), ("/foo/0", .string("bar")), ("/", .number("0")),
            ("/a~1b", .number("1")), ("/c%d", .number("2")), ("/e^f", .number("3")), ("/g|h", .number("4")),
            ("/i\\j", .number("5")), ("/k\"l", .number("6")), ("/ ", .number("7")), ("/m~0n", .number("8")),
        ]
        for (text, value) in cases { #expect(try JSONPointer(text).resolve(in: doc) == value, "\(text)") }
        #expect(try JSONPointer("").resolve(in: doc) == doc)
    }

    @Test func aPointerToNothingSaysHowFarItGot() throws {
        #expect(try JSONPointer("/foo/2").resolve(in: doc) == nil)
        #expect(try JSONPointer("/foo/01").resolve(in: doc) == nil)
        #expect(try JSONPointer("/foo/-").resolve(in: doc) == nil)
        #expect(try JSONPointer("/data/posts").whyNothing(in: doc) == #"/data is an object with no member "posts""#)
        #expect(try JSONPointer("/foo/7").whyNothing(in: doc) == #"/foo is an array of 2, with no element "7""#)
        #expect(try JSONPointer("/foo/0/x").whyNothing(in: doc) == "/foo/0 is a string")
        #expect(try JSONPointer("/nope").whyNothing(in: doc) == #"the document is an object with no member "nope""#)
        #expect(try JSONPointer("/data/items").whyNothing(in: doc) == nil)
    }

    @Test func badSyntaxIsRefusedWithTheRule() {
        for bad in ["data", "/a~", "/a~2", "~1"] {
            #expect(throws: JSONPointer.SyntaxError.self, "\(bad)") { try JSONPointer(bad) }
        }
    }

    @Test func theElementsOfANestedArrayKeepTheirExactText() throws {
        let text = #"{"data": {"items": [ {"id": 1, "t": "\u00e9"} , 2, [3] ]}, "data2": []}"#
        let bytes = Array(text.utf8)
        let (root, ranges) = try JSONParser.parseDocument(bytes, capturingArrayAt: ["data", "items"])
        let r = try #require(ranges)
        #expect(r.map { String(decoding: bytes[$0], as: UTF8.self) } == [#"{"id": 1, "t": "\u00e9"}"#, "2", "[3]"])
        // The captured array's elements are checked, not built: each is parsed from its range.
        #expect(try JSONPointer("/data/items").resolve(in: root) == .array([]))
        #expect(try JSONParser.parseElement(bytes[r[2]], capturedAt: ["data", "items"]) == .array([.number("3")]))
        #expect(try JSONPointer("/data2").resolve(in: root) == .array([]))
        // Not an array, or nothing there: no ranges, the document still whole.
        #expect(try JSONParser.parseDocument(bytes, capturingArrayAt: ["data"]).ranges == nil)
        #expect(try JSONParser.parseDocument(bytes, capturingArrayAt: ["missing"]).ranges == nil)
        #expect(try JSONParser.parseDocument(bytes, capturingArrayAt: ["data2"]).ranges == [])
        // An index token, and a repeated member read as its last.
        let arr = Array(#"[[1],[2,3]]"#.utf8)
        #expect(try JSONParser.parseDocument(arr, capturingArrayAt: ["1"]).ranges?.count == 2)
        let dup = Array(#"{"d":[1],"d":[1,2,3]}"#.utf8)
        #expect(try JSONParser.parseDocument(dup, capturingArrayAt: ["d"]).ranges?.count == 3)
        #expect(throws: JSONError.self) { try JSONParser.parseDocument(Array(#"{"d":[1]"#.utf8), capturingArrayAt: ["d"]) }
    }

    /// A feed's items are bounded while they are parsed (issue 33): the
    /// parse stops at the first element past `maxElements`, saying so.
    @Test func anArrayPastMaxElementsStopsTheParseThere() throws {
        let bytes = Array(#"{"items":[{"id":1},{"id":2},{"id":3}],"other":[1,2,3,4]}"#.utf8)
        #expect(try JSONParser.parseDocument(bytes, capturingArrayAt: ["items"], maxElements: 3).ranges?.count == 3)
        do {
            _ = try JSONParser.parseDocument(bytes, capturingArrayAt: ["items"], maxElements: 2)
            Issue.record("parsed past the bound")
        } catch {
            #expect(error.elementLimit == 2 && error.offset == 28, "\(error)")
            #expect(error.description == "invalid JSON at byte 28: the array holds more than 2 elements")
        }
        // Only the captured array is bounded: other arrays are not.
        #expect(try JSONParser.parseDocument(bytes, capturingArrayAt: ["other"], maxElements: 4).ranges?.count == 4)
        #expect(try JSONParser.parseDocument(Array("[]".utf8), capturingArrayAt: [], maxElements: 0).ranges == [])
    }
}
