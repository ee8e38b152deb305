#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import CacheStore
import CacheSystem

/// Each long pass of the store looks at the stop flag (`Store.stopPasses`,
/// raised by shutdown) and returns early, leaving the store as valid as
/// before it began (docs/architecture.md, "Background passes").
@Suite struct PassStopTests {
    static func posts(_ ids: ClosedRange<Int64>, title: String = "t") -> [(id: Int64, json: [UInt8])] {
        ids.map { ($0, Array("{\"id\":\($0),\"title\":\"\(title)\"}".utf8)) }
    }

    static func object(_ store: Store, _ bytes: [UInt8]) throws -> ObjectWriter {
        let w = try store.newObjectWriter(maxSize: 1 << 20)
        try bytes.withUnsafeBytes { try w.append($0) }
        return w
    }

    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("a png".utf8)

    /// Stopped part way (the flag raised while it runs, by the report of a
    /// foreign file it meets), the reconciliation says how far it got and
    /// records nothing as matching: the next start's pass is a whole one,
    /// and fixes every file.
    @Test func aReconciliationStoppedPartWayIsRedoneWholeAtTheNextStart() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts(Self.posts(1...40), validators: Validators())
        store.close()
        for id in 1...10 { try FileSystem.unlink(dir.path + "/posts/\(id).json") }
        try dir.writeDurably(Array("{}".utf8), to: "posts/20.json")
        try dir.writeDurably(Array("not the store's".utf8), to: "posts/notes.txt")

        var configuration = StoreConfiguration(directory: dir.path)
        let raiser = Locked<Store?>(nil)
        configuration.onIgnoredEntry = { _ in raiser.withLock { $0 }?.stopPasses() }
        store = try Store(configuration)
        raiser.withLock { $0 = store }
        #expect(store.postFilesCheck?.contains("the last stop was not clean") == true, "\(store.postFilesCheck ?? "nil")")
        let report = store.reconcilePostFilesAtStart()
        #expect(report.stopped && report.total == 40)
        #expect(report.checked < 40, "the ten missing files are written after the listing, past the stop: \(report)")
        store.close(clean: true)
        raiser.withLock { $0 = nil }
        #expect(try FileSystem.status(dir.path + "/posts.state") == nil, "a pass cut short records no clean stop")

        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.postFilesCheck != nil)
        let again = store.reconcilePostFilesAtStart()
        #expect(!again.stopped && again.checked == 40 && again.fixed >= 10, "\(again)")
        for (id, json) in Self.posts(1...40) { #expect(try FileSystem.read(dir.path + "/posts/\(id).json") == json, "post \(id)") }
        #expect(try FileSystem.read(dir.path + "/posts/notes.txt") == Array("not the store's".utf8))
    }

    @Test func aReconciliationAfterTheStopChecksNothing() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        _ = try store.replacePosts(Self.posts(1...3), validators: Validators())
        try FileSystem.unlink(dir.path + "/posts/2.json")
        store.stopPasses()
        #expect(store.isStopping)
        #expect(store.reconcilePostFiles() == PostFilesReport(fixed: 0, checked: 0, total: 3, stopped: true))
        #expect(try FileSystem.status(dir.path + "/posts/2.json") == nil)
    }

    /// A posts refresh begins no post file once the flag is raised: nothing
    /// is logged, the posts stay as they were, and a refresh that wrote some
    /// records no clean stop, so the next start puts the files back.
    @Test func aRefreshStoppedWritesNothingMoreAndLogsNothing() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        _ = try store.replacePosts(Self.posts(1...3), validators: Validators())
        let records = store.stats().logRecords
        store.stopPasses()
        do {
            _ = try store.replacePosts(Self.posts(1...4, title: "new"), validators: Validators())
            Issue.record("the refresh was stored after the stop")
        } catch {
            #expect("\(error)" == "the daemon is stopping: a posts refresh stopped after writing 0 of 4 post files; nothing was logged, "
                    + "the posts stay as they were, and the next start puts those files back")
        }
        #expect(store.stats().logRecords == records)
        for (id, json) in Self.posts(1...3) {
            #expect(store.post(id: .int(id)) == json)
            #expect(try FileSystem.read(dir.path + "/posts/\(id).json") == json)
        }
        #expect(try FileSystem.status(dir.path + "/posts/4.json") == nil)
    }

    /// Compaction looks at the flag before it begins and while it writes:
    /// the rename is its commit point, so the log stays whole and as it was,
    /// and no temp file is left. A write that would have compacted still
    /// succeeds; the compaction is due again later.
    @Test func aStoppedCompactionLeavesTheLogAsItWas() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var configuration = StoreConfiguration(directory: dir.path)
        configuration.compactionSlack = 0
        let notices = Locked<[String]>([])
        configuration.onNotice = { line in notices.withLock { $0.append(line) } }
        var store = try Store(configuration)
        for round in 0..<3 { _ = try store.replacePosts(Self.posts(1...5, title: "r\(round)"), validators: Validators()) }
        let before = try FileSystem.read(dir.path + "/index.log")
        let inode = try FileSystem.status(dir.path + "/index.log")?.inode
        store.stopPasses()
        #expect(throws: StoreError.self) { try store.compact() }
        do { _ = try store.compact() } catch {
            #expect("\(error)".hasPrefix("the daemon is stopping: compaction of index.log ("), "\(error)")
        }
        // Past the slack, this write would compact: it is logged, and the log is not rewritten.
        try store.replaceManifest([("a.png", nil)], validators: Validators())
        let after = try FileSystem.read(dir.path + "/index.log")
        #expect(Array(after.prefix(before.count)) == before && after.count > before.count, "appended to, never rewritten")
        #expect(try FileSystem.status(dir.path + "/index.log")?.inode == inode)
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty)
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.post(id: .int(3)) == Array("{\"id\":3,\"title\":\"r2\"}".utf8))
        #expect(store.row(0)?.url == "a.png")
        _ = try store.compact()
        #expect(store.post(id: .int(3)) == Array("{\"id\":3,\"title\":\"r2\"}".utf8), "compacted once the daemon runs again")
    }

    /// The log's rewrite stopped part way (before the first transaction, or
    /// between pieces of its file) throws ECANCELED and leaves the log.
    @Test func aStoppedRewriteThrowsAndLeavesTheLog() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let files = try ConfinedDirectory(opening: dir.path)
        defer { files.close() }
        try files.makeDirectory("tmp")
        try files.writeDurably(Array("the old log".utf8), to: "log", tempDirectory: "tmp")
        let stop = StopFlag()
        stop.raise()
        #expect(throws: SystemError.self) {
            try files.writeDurably([UInt8](repeating: 7, count: ConfinedDirectory.stoppablePiece + 1), to: "log", tempDirectory: "tmp", stop: stop)
        }
        do { try files.writeDurably([1], to: "log", tempDirectory: "tmp", stop: stop) } catch { #expect(error.errno == ECANCELED) }
        #expect(try files.read("log") == Array("the old log".utf8))
        #expect(try files.list("tmp").isEmpty, "the temp file is removed")
        let unraised = StopFlag()
        let big = [UInt8](repeating: 7, count: ConfinedDirectory.stoppablePiece * 2 + 3)
        try files.writeDurably(big, to: "log", tempDirectory: "tmp", stop: unraised)
        #expect(try files.read("log") == big, "written piece by piece when not stopped")
    }

    /// gc stopped between files: the objects no row references are already
    /// forgotten in the log, their files left for the next gc.
    @Test func aStoppedGcLeavesItsFilesToTheNextGc() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var configuration = StoreConfiguration(directory: dir.path)
        let raiser = Locked<Store?>(nil)
        configuration.onIgnoredEntry = { _ in raiser.withLock { $0 }?.stopPasses() }
        var store = try Store(configuration)
        try store.replaceManifest((0..<4).map { ("\($0).png", nil) }, validators: Validators())
        var refs: [ObjectRef] = []
        for i in 0..<4 { refs.append(try store.commitObject(try Self.object(store, Self.png + [UInt8(i)]), rows: [(i, "\(i).png")])) }
        try store.replaceManifest([("other.png", nil)], validators: Validators())
        // Foreign files in two fan-out directories: the first met raises the
        // flag, and the other directory's entries come after it.
        let fans = Set(refs.map { String($0.hash.hex.prefix(2)) }).sorted()
        for fan in fans.prefix(2) { try dir.writeDurably(Array("mine".utf8), to: "objects/\(fan)/notes.txt") }
        raiser.withLock { $0 = store }
        if fans.count >= 2 {
            #expect(throws: StoreError.self) { try store.collectGarbage() }
        } else {
            _ = try? store.collectGarbage()
        }
        raiser.withLock { $0 = nil }
        #expect(store.stats().objects == 0, "every unreferenced object is forgotten in the log first")
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        _ = try store.collectGarbage()
        for ref in refs { #expect(try FileSystem.status(store.objectPath(ref.hash)) == nil) }
        for fan in fans.prefix(2) { #expect(try FileSystem.read(dir.path + "/objects/\(fan)/notes.txt") == Array("mine".utf8)) }
    }

    /// Eviction forgets its victims in the log with the commit, then
    /// removes their files: stopped, the commit stands, the files stay for gc.
    @Test func aStoppedEvictionLeavesItsFilesToTheNextGc() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var configuration = StoreConfiguration(directory: dir.path)
        configuration.maxBytes = Int64(Self.png.count + 1)
        let notices = Locked<[String]>([])
        configuration.onNotice = { line in notices.withLock { $0.append(line) } }
        var store = try Store(configuration)
        try store.replaceManifest([("a.png", nil), ("b.png", nil)], validators: Validators())
        let a = try store.commitObject(try Self.object(store, Self.png + [1]), rows: [(0, "a.png")])
        store.stopPasses()
        let b = try store.commitObject(try Self.object(store, Self.png + [2]), rows: [(1, "b.png")])
        #expect(store.row(1)?.object == b && store.row(0)?.object == nil, "the commit stands and evicted the other")
        #expect(try FileSystem.status(store.objectPath(a.hash)) != nil, "its file is left")
        #expect(notices.withLock { $0 } == ["eviction stopped after removing the files of 0 of 1 evicted objects; the next gc removes the rest"])
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.row(1)?.object == b && store.row(0)?.object == nil)
        #expect(try store.collectGarbage().removed == 1)
        #expect(try FileSystem.status(store.objectPath(a.hash)) == nil)
    }

    @Test func theSweepOfObjectFilesAndAStoppableHashStop() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try store.replaceManifest([("a.png", nil)], validators: Validators())
        let ref = try store.commitObject(try Self.object(store, Self.png), rows: [(0, "a.png")])
        store.stopPasses()
        #expect(try store.dropMissingObjects() == ObjectFilesReport(dropped: 0, checked: 0, total: 1, stopped: true))
        do {
            let (fd, _) = try store.openVerified(ref.hash, rehash: true, touching: false, stoppable: true)
            fd.close()
            Issue.record("a stoppable hash ran after the stop")
        } catch {
            guard case .stopped = error else { Issue.record("\(error)"); return }
        }
        #expect(store.row(0)?.object == ref, "neither judged nor forgotten")
        #expect(try FileSystem.read(store.objectPath(ref.hash)) == Self.png)
        // Reads go on while the daemon stops.
        let (fd, size) = try store.openVerified(ref.hash)
        fd.close()
        #expect(size == Int64(Self.png.count))
    }
}
