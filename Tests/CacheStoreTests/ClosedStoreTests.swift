#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import CacheStore
import CacheSystem

/// A closed store refuses every write (`Store.close`): the daemon's shutdown
/// closes it even when a thread it stopped waiting for (on a disk that
/// hangs) may still hand over a download or a refresh, and such a late
/// write must not reach the closed descriptors, whose numbers the process
/// may have given to other files since.
@Suite struct ClosedStoreTests {
    private static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("the rest of a png".utf8)

    /// `body` throws `writesStopped` saying the store is closed.
    private static func refusedAsClosed(_ what: String, _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("\(what) after close was accepted")
        } catch let error as StoreError {
            guard case .writesStopped(let why) = error else { Issue.record("\(what): \(error), not writesStopped"); return }
            #expect(why == Store.closedReason, "\(what)")
        } catch {
            Issue.record("\(what): \(error)")
        }
    }

    @Test func everyWriteAfterCloseIsRefusedAndLeavesNothing() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let warnings = Locked<[String]>([])
        var configuration = StoreConfiguration(directory: dir.path)
        configuration.onWarning = { line in warnings.withLock { $0.append(line) } }
        let store = try Store(configuration)
        // Begun before the close, as a download the shutdown gave up waiting for.
        let late = try store.newObjectWriter(maxSize: 1 << 20)
        try Self.png.withUnsafeBytes { try late.append($0) }
        store.close()

        Self.refusedAsClosed("an object's commit") { _ = try store.commitObject(late, rows: [(row: 0, url: "http://o/a.png")]) }
        Self.refusedAsClosed("a new download") { _ = try store.newObjectWriter(maxSize: 1 << 20) }
        Self.refusedAsClosed("a posts refresh") {
            _ = try store.replacePosts([(id: 1, json: Array("{\"id\":1}".utf8))], validators: Validators())
        }
        #expect(store.writesStopped == Store.closedReason)
        // The refused download's temp file is left for the next open: not
        // removed through the closed descriptor (which failed, EBADF).
        #expect(!warnings.withLock { $0 }.contains { $0.contains("could not remove the temp file") }, "\(warnings.withLock { $0 })")
        #expect(try FileSystem.list(dir.path + "/tmp").count == 1)

        // Reopened: none of them is there, and the download's temp file is gone.
        let again = try Store(StoreConfiguration(directory: dir.path))
        defer { again.close() }
        #expect(again.postCount == 0)
        #expect(again.knownObjects().isEmpty)
        #expect(try FileSystem.list(dir.path + "/objects").isEmpty)
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty)
    }

    @Test func aCloseDuringAFileWriteKeepsTheDirectoryOpenUnderIt() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let warnings = Locked<[String]>([])
        var configuration = StoreConfiguration(directory: dir.path)
        configuration.onWarning = { line in warnings.withLock { $0.append(line) } }
        let store = try Store(configuration)
        try store.writingFiles { () throws(StoreError) in
            store.close()
            // This writer is past its check: what it writes through stays open.
            #expect(fcntl(store.directoryFD.rawValue, F_GETFD) != -1)
            #expect((try? store.files.status("objects"))??.isDirectory == true)
        }
        #expect(warnings.withLock { $0 }.contains { $0.contains("stays open until the 1 file write(s) running at close end") }, "\(warnings.withLock { $0 })")
        // That writer, the last, closed it as it left: nothing is left to close.
        #expect(store.fileWriters.withLock { $0.running == 0 && !$0.directoryLeftOpen })
    }
}
