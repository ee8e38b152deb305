#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import CacheStore
import CacheSystem

/// `posts.state` (docs/storage-format.md, "The posts' state"): a clean stop
/// with every post file matching the log lets the next start skip the
/// reconciliation of `posts/`; anything else (a crash, a pass cut short, a
/// post file that failed, a change to `posts/` or the log while the daemon
/// was down, a damaged record) makes it check every file.
@Suite struct CleanStopTests {
    static func posts(_ ids: ClosedRange<Int64>) -> [(id: Int64, json: [UInt8])] {
        ids.map { ($0, Array("{\"id\":\($0)}".utf8)) }
    }

    /// A store of three posts, reconciled and closed cleanly: `posts.state` written.
    static func cleanlyStopped(_ dir: TempDir) throws {
        let store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts(posts(1...3), validators: Validators())
        #expect(!store.reconcilePostFilesAtStart().stopped)
        store.close(clean: true)
        #expect(try FileSystem.status(dir.path + "/posts.state")?.isRegular == true)
    }

    @Test func aCleanStopLetsTheNextStartSkipTheCheckOnce() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        try Self.cleanlyStopped(dir)
        let text = String(decoding: try FileSystem.read(dir.path + "/posts.state"), as: UTF8.self)
        #expect(text.hasPrefix("cached posts state 1\nlog ") && text.contains("\nposts ") && text.contains("\ncheck "), "\(text)")

        var store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.postFilesCheck == nil)
        #expect(try FileSystem.status(dir.path + "/posts.state") == nil, "taken at open: it stands for one stop")
        #expect(store.reconcilePostFilesAtStart() == PostFilesReport(total: 3))
        // A crash (no clean close) after it: the next start checks.
        _ = try store.replacePosts(Self.posts(1...4), validators: Validators())
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.postFilesCheck?.contains("the last stop was not clean") == true)
        #expect(store.reconcilePostFilesAtStart().checked == 4)
        // Skipped at start and stopped cleanly again: still recorded.
        store.close(clean: true)
        store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.postFilesCheck == nil)
        store.close(clean: true)
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.postFilesCheck == nil)
    }

    @Test func aChangeToPostsOrTheLogWhileStoppedIsNoticed() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        try Self.cleanlyStopped(dir)
        // A post file removed by hand (any rename or removal in posts/).
        try FileSystem.unlink(dir.path + "/posts/2.json")
        var store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.postFilesCheck == "posts/ changed after the daemon stopped cleanly")
        #expect(store.reconcilePostFilesAtStart().fixed == 1)
        #expect(try FileSystem.read(dir.path + "/posts/2.json") == Array("{\"id\":2}".utf8))
        store.close(clean: true)

        // The log touched (an append moves its size and times; so does this).
        let fd = try FileDescriptor.open(dir.path + "/index.log", .readOnly)
        #expect(futimens(fd.rawValue, nil) == 0)
        fd.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.postFilesCheck == "index.log changed after the daemon stopped cleanly")
        #expect(store.reconcilePostFilesAtStart().fixed == 0)
        store.close(clean: true)

        // A damaged record: checked, and replaced by the next clean stop.
        var bytes = try FileSystem.read(dir.path + "/posts.state")
        bytes[30] ^= 1
        try dir.writeDurably(bytes, to: "posts.state")
        store = try Store(StoreConfiguration(directory: dir.path))
        #expect(store.postFilesCheck?.hasSuffix("posts.state is damaged (its check does not match its bytes)") == true, "\(store.postFilesCheck ?? "nil")")
        #expect(try FileSystem.status(dir.path + "/posts.state") == nil)
        #expect(store.reconcilePostFilesAtStart().fixed == 0)
        store.close(clean: true)
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.postFilesCheck == nil)
    }

    /// A post file that could not be removed after its transaction (a
    /// directory of that name in its place) leaves `posts/` differing from
    /// the log: no clean stop is recorded, and the next start checks.
    @Test func aPostFileThatFailedKeepsTheCleanStopFromBeingRecorded() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        try Self.cleanlyStopped(dir)
        var store = try Store(StoreConfiguration(directory: dir.path))
        try FileSystem.unlink(dir.path + "/posts/3.json")
        try FileSystem.makeDirectory(dir.path + "/posts/3.json")
        try FileSystem.makeDirectory(dir.path + "/posts/3.json/inside")
        _ = try store.replacePosts(Self.posts(1...2), validators: Validators())
        store.close(clean: true)
        #expect(try FileSystem.status(dir.path + "/posts.state") == nil)
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.postFilesCheck?.contains("the last stop was not clean") == true)
    }

    /// Only a regular file of that name is the store's: a directory called
    /// `posts.state` is neither removed at open nor replaced at a clean stop.
    @Test func aPostsStateThatIsNotAFileIsLeftAsItIs() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let warnings = Locked<[String]>([])
        var configuration = StoreConfiguration(directory: dir.path)
        configuration.onWarning = { line in warnings.withLock { $0.append(line) } }
        var store = try Store(configuration)
        store.close()
        try FileSystem.makeDirectory(dir.path + "/posts.state")
        store = try Store(configuration)
        #expect(store.postFilesCheck == "\(dir.path)/posts.state is a directory, not a file cached made; it is left as it is")
        #expect(!store.reconcilePostFilesAtStart().stopped)
        store.close(clean: true)
        #expect(try FileSystem.status(dir.path + "/posts.state")?.isDirectory == true)
        #expect(warnings.withLock { $0 }.contains { $0.hasPrefix("could not record the clean stop in \(dir.path)/posts.state") }, "\(warnings.withLock { $0 })")
    }

    @Test func theRecordReadsBackAsWrittenAndRefusesDamage() throws {
        let f = FileIdentity(device: 2049, inode: 77, size: 4096, modified: 1_764_000_000_123_456_789, changed: -5)
        let g = FileIdentity(device: 2049, inode: 78, size: 290_000_000, modified: 1, changed: 2)
        let state = PostsState(log: g, posts: f)
        #expect(try PostsState(decoding: state.encoded) == state)
        let text = state.encoded
        for cut in [0, 10, text.count - 1] {
            #expect(throws: PostsStateDamage.self) { try PostsState(decoding: Array(text.prefix(cut))) }
        }
        #expect(throws: PostsStateDamage.self) { try PostsState(decoding: [UInt8](repeating: 0x20, count: PostsState.maxBytes + 1)) }
        let other = Array("cached posts state 2\nlog 1 2 3 4 5\nposts 1 2 3 4 5\n".utf8)
        #expect(throws: PostsStateDamage.self) { try PostsState(decoding: other + Array("check \(Hash128(of: other).hex)\n".utf8)) }
    }
}
