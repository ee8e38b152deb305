import Testing
@testable import CacheService
import CacheProtocol
import CacheSystem

/// A large page decoded from a body handed over (`postsPage(consuming:)`)
/// gives back the body's pages behind the posts it has copied out: the
/// posts must be exactly those of the same body decoded while shared.
@Suite struct PostsDecodingDiscardTests {
    /// About 12 MiB: posts of many sizes (one of 5 MiB, across many pages
    /// and give-backs), whitespace between and inside, elements skipped.
    static func largeBody() -> [UInt8] {
        var text = "[\n"
        var n = 0
        while text.utf8.count < 12 << 20 {
            n += 1
            switch n % 7 {
            case 0: text += "  \"not an object\",\n"
            case 1: text += "  {\"id\": \(n), \"title\": \"\(String(repeating: "t", count: n % 500))\", \"tags\": [1, 2, {\"k\": null}]},\n"
            case 2: text += "  {\"title\": \"no id \(n)\"},\n"
            case 3 where n == 3: text += "  {\"id\": \"big\", \"body\": \"\(String(repeating: "b", count: 5 << 20))\"},\n"
            default: text += "  {  \"id\" : \"s\(n)\" ,  \"n\" : \(n) , \"body\": \"\(String(repeating: "x", count: (n * 37) % 3000))\" }  ,\n"
            }
        }
        text += "  {\"id\": \"last\"}\n]\n"
        return Array(text.utf8)
    }

    @Test func aHandedOverBodyDecodesToTheSamePostsAsASharedOne() throws {
        let body = Self.largeBody()
        #expect(body.count > Memory.largeBody + FeedDecoder.discardStep)
        let shape = FeedShape(prefix: "posts")
        let shared = try FeedDecoder.postsPage(body, shape: shape, id: .member("id"))
        // Storage of its own (`Array(body)` would share body's): the decoder is its only holder and gives its pages back in place.
        let copy = body.withUnsafeBufferPointer { Array($0) }
        let owned = try FeedDecoder.postsPage(consuming: copy, shape: shape, id: .member("id"))
        #expect(owned.posts.count == shared.posts.count)
        #expect(owned.posts.count > 1_000)
        #expect(owned.posts.elementsEqual(shared.posts) { $0.id == $1.id && $0.json == $1.json })
        #expect(owned.invalid == shared.invalid && owned.problems == shared.problems)
        #expect(owned.posts.contains { $0.id == .string("big") && $0.json.count > 5 << 20 })
        #expect(owned.posts.last?.id == .string("last"))
    }

    /// A caller that keeps its array sees it unchanged: the decoder copies
    /// a shared body before it gives any of its pages back.
    @Test func aBodyTheCallerStillHoldsIsNeverChanged() throws {
        let body = Self.largeBody()
        let before = body.reduce(into: UInt64(0)) { $0 = $0 &* 31 &+ UInt64($1) }
        let page = try FeedDecoder.postsPage(consuming: body, shape: FeedShape(prefix: "posts"), id: .member("id"))
        #expect(page.posts.count > 1_000)
        #expect(body.reduce(into: UInt64(0)) { $0 = $0 &* 31 &+ UInt64($1) } == before)
        #expect(!body[(1 << 20)..<(2 << 20)].allSatisfy { $0 == 0 })
    }
}

/// What the refresh's decode relies on to give a body's pages back in
/// place: a `PageBody` hands over the very storage it was given (no copy
/// on the way), once.
@Suite struct PageBodyTests {
    @Test func takingHandsOverTheStorageItWasGivenOnce() {
        var bytes = [UInt8](repeating: 7, count: 1 << 20)
        let address = bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        let page = PageBody(bytes)
        bytes = []  // the page is now the storage's only holder
        var taken = page.take()
        #expect(page.count == 1 << 20)
        // A mutable access copies shared storage: the same address says it was not shared.
        let after = taken.withUnsafeMutableBufferPointer { UInt(bitPattern: $0.baseAddress) }
        #expect(after == address, "the body was copied on its way to the decoder")
        #expect(taken.count == 1 << 20 && page.take().isEmpty, "a second take gets nothing")
    }
}
