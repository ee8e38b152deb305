import Testing
import CacheProtocol

/// The socket's operations as docs/protocol.md says, one test each, through
/// the real dispatcher over a seeded store (`DispatchFixture`).
@Suite struct DispatchTests {
    @Test func ping() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        #expect(try f.socket(#"{"op":"ping"}"#).json["protocol"]?.integer == 1)
    }

    @Test func statusCountsAndEchoesTheTag() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let status = try f.socket(#"{"op":"status","tag":7}"#).json
        #expect(status["posts"]?.integer == 2 && status["tag"]?.integer == 7)
    }

    @Test func getPost() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        #expect(try f.socket(#"{"op":"get_post","id":"2"}"#).json["post"]?["title"]?.string == "two", "\"2\" finds the integer 2")
        #expect(try f.code(#"{"op":"get_post","id":3}"#) == "not_found")
    }

    @Test func listPostsPagesAndSearches() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let listed = try f.socket(#"{"op":"list_posts","offset":1}"#).json
        #expect(listed["total"]?.integer == 2 && listed["ids"] == .array([.number("2")]))
        let found = try f.socket(#"{"op":"list_posts","query":"TWO"}"#).json
        #expect(found["total"]?.integer == 1 && found["ids"] == .array([.number("2")]), "\(found)")
    }

    @Test func getImageCachedNotCachedAndAbsent() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        #expect(try f.socket(#"{"op":"get_image","row":0}"#).json["image"]?["hash"]?.string == f.hash.hex)
        #expect(try f.code(#"{"op":"get_image","row":1,"fetch":false}"#) == "not_cached")
        #expect(try f.code(#"{"op":"get_image","row":9}"#) == "not_found")
        // Row 1 not cached and fetched: there is no origin to fetch it from.
        #expect(try f.code(#"{"op":"get_image","row":1}"#) == "upstream")
    }

    @Test func listImages() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let images = try f.socket(#"{"op":"list_images","limit":1}"#).json
        #expect(images["total"]?.integer == 2 && images["images"]?.array?.count == 1)
    }

    @Test func readGivesTheLineThenExactlyTheBytes() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let (head, bytes, _) = try f.socket(#"{"op":"read","hash":"\#(f.hash.hex)"}"#)
        #expect(head["size"]?.integer == Int64(DispatchFixture.png.count) && bytes == DispatchFixture.png)
        #expect(try f.code(#"{"op":"read","hash":"00000000000000000000000000000000"}"#) == "not_found")
    }

    @Test func openPassesOneDescriptor() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let (opened, _, passed) = try f.socket(#"{"op":"open","hash":"\#(f.hash.hex)"}"#)
        #expect(opened["size"]?.integer == Int64(DispatchFixture.png.count) && passed == 1)
        #expect(try f.socket(#"{"op":"open","hash":"00000000000000000000000000000000"}"#).passed == 0, "no descriptor with an error")
    }

    @Test func openOfManyPassesOneDescriptorPerObjectOpened() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let absent = "00000000000000000000000000000000"
        let (answer, _, passed) = try f.socket(#"{"op":"open","hashes":["\#(f.hash.hex)","\#(absent)","\#(f.hash.hex)"]}"#)
        let objects = try #require(answer["objects"]?.array)
        #expect(objects.count == 3 && passed == 2)
        #expect(objects[0]["size"]?.integer == Int64(DispatchFixture.png.count) && objects[1]["error"]?["code"]?.string == "not_found")
        #expect(try f.code(#"{"op":"open","hashes":[]}"#) == "bad_request")
    }

    @Test func verifyChecksEveryObject() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let verify = try f.socket(#"{"op":"verify"}"#).json
        #expect(verify["checked"]?.integer == 1 && verify["corrupt"] == .array([]))
    }

    @Test func gcAnswersLaterThroughTheMailbox() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let gc = try f.socket(#"{"op":"gc"}"#).json
        #expect(gc["ok"] == .bool(true) && gc["removed"]?.integer == 0, "\(gc)")
    }

    @Test func compactKeepsEverything() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let compacted = try f.socket(#"{"op":"compact"}"#).json
        #expect(compacted["ok"] == .bool(true), "\(compacted)")
        #expect(try f.socket(#"{"op":"status"}"#).json["posts"]?.integer == 2)
        #expect(try f.socket(#"{"op":"read","hash":"\#(f.hash.hex)"}"#).rest == DispatchFixture.png)
    }

    @Test func deletePostRemovesOnlyThatPost() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let deleted = try f.socket(#"{"op":"delete_post","id":1}"#).json
        #expect(deleted["deleted"] == .bool(true), "\(deleted)")
        #expect(try f.code(#"{"op":"get_post","id":1}"#) == "not_found")
        #expect(try f.code(#"{"op":"delete_post","id":1}"#) == "not_found")
        #expect(try f.socket(#"{"op":"get_post","id":2}"#).json["post"] != nil)
    }

    @Test func prefetchWithoutAFeedSaysWhatIsNotConfigured() throws {
        let f = try DispatchFixture(); defer { f.remove() }
        let answer = try f.socket(#"{"op":"prefetch","what":"posts"}"#).json
        #expect(answer["error"]?["code"]?.string == "upstream", "\(answer)")
        #expect(answer["error"]?["message"]?.string?.contains("posts-url is not configured") == true, "\(answer)")
    }
}
