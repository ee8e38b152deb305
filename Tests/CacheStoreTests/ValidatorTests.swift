import Testing
@testable import CacheStore
import CacheSystem

/// Validators are sent back in conditional request headers, so a value with
/// a control character (0.1.0 stored them with the header's CRLF) must
/// never be stored, replayed or sent.
@Suite struct ValidatorTests {
    @Test func unsafeValuesAreDroppedOnWrite() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        _ = try store.replacePosts([(1, Array("{\"id\":1}".utf8))],
                                   validators: Validators(etag: "\"v1\"\r\n", lastModified: "Mon, 30 Nov 2026 11:54:36 GMT"))
        #expect(store.validators(for: .posts) == Validators(etag: nil, lastModified: "Mon, 30 Nov 2026 11:54:36 GMT"))
        try store.replaceManifest([("a.png", nil)], validators: Validators(etag: "\"m\"", lastModified: "Mon\r\n"))
        #expect(store.validators(for: .manifest) == Validators(etag: "\"m\"", lastModified: nil))
    }

    @Test func damagedValidatorsInAnOldLogHealOnOpenAndOnTheNextRefresh() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts([(1, Array("{\"id\":1}".utf8))], validators: Validators())
        store.close()
        // What 0.1.0 logged: both values with the header line's CRLF.
        let files = try ConfinedDirectory(opening: dir.path)
        defer { files.close() }
        var log = try IndexLog(directory: files, name: "index.log") { _ in }
        try log.append([.validators(feed: .posts, etag: "\"abc\"\r\n", lastModified: "Mon, 30 Nov 2026 11:54:36 GMT\r\n")])
        log.close()

        store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.damagedValidators == [.posts])
        #expect(store.validators(for: .posts) == Validators())
        #expect(store.posts(offset: 0, limit: 10).total == 1)
        // The next (unconditional) refresh stores the clean values, though no post changed.
        _ = try store.replacePosts([(1, Array("{\"id\":1}".utf8))], validators: Validators(etag: "\"abc\""))
        store.close()

        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.damagedValidators.isEmpty)
        #expect(store.validators(for: .posts) == Validators(etag: "\"abc\""))
    }

    @Test func theRule() {
        #expect(Validators(etag: "\"a\"", lastModified: "Tue, 01 Dec 2026 06:00:00 GMT").isDamaged == false)
        #expect(Validators(etag: "\"a\"\r\n").isDamaged)
        #expect(Validators(etag: " \"a\"").isDamaged)
        #expect(Validators(lastModified: "x\u{0}").isDamaged)
    }
}
