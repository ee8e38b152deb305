import Testing
import Foundation
import Dispatch
@testable import CacheStore
import CacheSystem

@Suite struct CompactionTests {
    @Test func aCompactedLogHoldsOneUseTimePerObjectNotPerRow() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        // 300 rows sharing 3 objects.
        let rows = (0..<300).map { ("img\($0 % 3).png", String?.none) }
        try store.replaceManifest(rows, validators: Validators())
        for k in 0..<3 {
            let w = try store.newObjectWriter(maxSize: 1 << 20)
            let bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("object \(k)".utf8)
            try bytes.withUnsafeBytes { try w.append($0) }
            _ = try store.commitObject(w, rows: (0..<300).filter { $0 % 3 == k }.map { ($0, "img\(k).png") })
        }
        _ = try store.compact()
        var access = 0, rowObjects = 0
        _ = LogScanner.scan(try FileSystem.read(dir.path + "/index.log")) { records in
            for r in records {
                if case .access = r { access += 1 }
                if case .rowObject = r { rowObjects += 1 }
            }
        }
        #expect(rowObjects == 300)
        #expect(access == 3)
        // The use times survive the compaction.
        let before = store.state.withLock { $0.objects.lastUses }
        store.close()
        let reopened = try Store(StoreConfiguration(directory: dir.path))
        defer { reopened.close() }
        #expect(reopened.state.withLock { $0.objects.lastUses } == before)
    }
}

/// A large posts refresh writes its files without the writer lock, so object
/// commits, evictions and gc are not held up while it runs.
@Suite struct PostsRefreshLockTests {
    @Test func postFilesAreWrittenWhileTheWriterLockIsHeldElsewhere() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let posts = (1...300).map { (Int64($0), Array("{\"id\":\($0),\"title\":\"t\"}".utf8)) }
        let done = DispatchSemaphore(value: 0)
        // Hold the writer lock (as a slow object commit would) while the refresh runs.
        let release = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            store.writerForTests.withLock { _ in
                held.signal()
                _ = release.wait(timeout: .now() + 30)
            }
        }
        held.wait()
        Thread.detachNewThread {
            _ = try? store.replacePosts(posts, validators: Validators())
            done.signal()
        }
        // Every post file lands while the writer lock is still held elsewhere;
        // only the log transaction waits for it.
        var written = 0
        for _ in 0..<500 {
            written = (try? FileSystem.list(dir.path + "/posts"))?.count ?? 0
            if written == 300 { break }
            usleep(20_000)
        }
        #expect(written == 300, "post files written while the writer lock was held: \(written)")
        #expect(done.wait(timeout: .now()) == .timedOut, "the log transaction waits for the writer lock")
        release.signal()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(store.posts(offset: 0, limit: 0).total == 300)
    }
}

@Suite struct DuplicateCommitTests {
    @Test func aGoodFileUnderTheNameIsKeptEvenBeforeItIsLogged() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try store.replaceManifest([("a.png", nil), ("b.png", nil)], validators: Validators())
        let bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("same bytes".utf8)
        func writer() throws -> ObjectWriter {
            let w = try store.newObjectWriter(maxSize: 1 << 20)
            try bytes.withUnsafeBytes { try w.append($0) }
            return w
        }
        // A concurrent commit of the same bytes has placed its file but not logged it yet.
        let first = try writer()
        let path = store.objectPath(first.hash)
        try FileSystem.makeDirectory(FileSystem.directoryName(of: path))
        try dir.writeDurably(bytes, to: Store.objectRelativePath(first.hash))
        first.discard()
        _ = try store.commitObject(try writer(), rows: [(1, "b.png")])
        #expect(try FileSystem.list(dir.path + "/quarantine").isEmpty, "a good copy is not quarantined")
        #expect(try FileSystem.read(path) == bytes)
        // A damaged copy is replaced in one step, and kept aside.
        try dir.writeDurably(bytes.map { $0 ^ 1 }, to: Store.objectRelativePath(first.hash))
        _ = try store.commitObject(try writer(), rows: [(0, "a.png")])
        #expect(try FileSystem.read(path) == bytes)
        #expect(try FileSystem.list(dir.path + "/quarantine").count == 1)
    }
}
