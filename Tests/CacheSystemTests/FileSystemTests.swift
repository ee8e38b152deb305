#if canImport(Glibc)
import Glibc
#endif
import Testing
import CacheSystem

@Suite struct FileSystemTests {
    // The durable write (`ConfinedDirectory.writeDurably`, the only one),
    // with absolute paths under the directory as the store spells them.

    @Test func writeDurablyReplacesTheTargetAndLeavesNoTempBehind() throws {
        let dir = TempDirectory()
        dir.makeDirectory("tmp")
        let files = try ConfinedDirectory(opening: dir.path)
        defer { files.close() }
        let target = dir.write("target", "old contents")
        let bytes = pattern(70_000, seed: 9)
        try files.writeDurably(bytes, to: target, tempDirectory: dir.at("tmp"), mode: 0o640)
        #expect(dir.contents("target") == bytes)
        #expect(permissions(target) == 0o640)
        #expect(dir.names(in: "tmp") == [])
        #expect(dir.names() == ["target", "tmp"])

        // A new file, without the directory fsync.
        try files.writeDurably(Array("second".utf8), to: dir.at("fresh"), tempDirectory: dir.at("tmp"),
                               syncDirectory: false)
        #expect(dir.contents("fresh") == Array("second".utf8))
        #expect(dir.names(in: "tmp") == [])
    }

    @Test func writeDurablyOverALinkReplacesTheLinkNotItsTarget() throws {
        let dir = TempDirectory()
        let files = try ConfinedDirectory(opening: dir.path)
        defer { files.close() }
        let elsewhere = dir.write("elsewhere", "untouched")
        let link = dir.link("link", to: elsewhere)
        try files.writeDurably(Array("new".utf8), to: link, tempDirectory: dir.path)
        #expect(dir.contents("elsewhere") == Array("untouched".utf8))
        #expect(try FileSystem.status(link)?.isRegular == true)
        #expect(dir.contents("link") == Array("new".utf8))
        #expect(dir.names() == ["elsewhere", "link"])
    }

    @Test func aFailedRenameRemovesTheTempFileAndSaysWhichPaths() throws {
        let dir = TempDirectory()
        dir.makeDirectory("tmp")
        let files = try ConfinedDirectory(opening: dir.path)
        defer { files.close() }
        // A file cannot be renamed over a directory that holds something (EISDIR).
        let target = dir.makeDirectory("a-directory")
        dir.write("a-directory/inside", "kept")
        let error = #expect(throws: SystemError.self) {
            try files.writeDurably(Array("x".utf8), to: target, tempDirectory: dir.at("tmp"))
        }
        #expect(error?.call == "rename")
        #expect(error?.errno == EISDIR)
        #expect(error?.subject.hasSuffix(" -> \(target)") == true)
        #expect(error?.subject.hasPrefix(dir.at("tmp") + "/") == true)
        #expect(dir.names(in: "tmp") == [])
        #expect(dir.contents("a-directory/inside") == Array("kept".utf8))
    }

    @Test func aMissingTempDirectoryIsAnOpenError() throws {
        let dir = TempDirectory()
        let files = try ConfinedDirectory(opening: dir.path)
        defer { files.close() }
        let target = dir.write("target", "old")
        let error = #expect(throws: SystemError.self) {
            try files.writeDurably(Array("x".utf8), to: target, tempDirectory: dir.at("no-tmp"))
        }
        #expect(error?.call == "open")
        #expect(error?.errno == ENOENT)
        #expect(error?.subject.hasPrefix(dir.at("no-tmp") + "/") == true)
        #expect(dir.contents("target") == Array("old".utf8))
    }

    @Test func makeDirectoriesCreatesEveryMissingLevelWithTheMode() throws {
        let dir = TempDirectory()
        let deep = dir.at("a/b/c")
        try FileSystem.makeDirectories(deep, mode: 0o700)
        for p in ["a", "a/b", "a/b/c"] {
            #expect(try FileSystem.status(dir.at(p))?.isDirectory == true, "\(p)")
            #expect(permissions(dir.at(p)) == 0o700, "\(p)")
        }
        // Again, and with a trailing slash: nothing to do, no error.
        try FileSystem.makeDirectories(deep)
        try FileSystem.makeDirectories(deep + "/")
        #expect(dir.names(in: "a/b/c") == [])
        try FileSystem.makeDirectories(dir.at("a/d"))
        #expect(dir.names(in: "a") == ["b", "d"])
    }

    @Test func makeDirectoriesThroughAFileFailsNamingTheLevel() throws {
        let dir = TempDirectory()
        dir.write("file", "x")
        let error = #expect(throws: SystemError.self) { try FileSystem.makeDirectories(dir.at("file/sub/deeper")) }
        #expect(error?.call == "mkdir")
        #expect(error?.errno == ENOTDIR)
        #expect(error?.subject == dir.at("file/sub"))
    }

    @Test func makeDirectoryMakesOneLevelOnly() throws {
        let dir = TempDirectory()
        try FileSystem.makeDirectory(dir.at("one"), mode: 0o750)
        // mkdir's mode goes through the umask: at most 0750, and the owner's bits.
        #expect(permissions(dir.at("one")) & ~0o750 == 0)
        #expect(permissions(dir.at("one")) & 0o700 == 0o700)
        try FileSystem.makeDirectory(dir.at("one"))
        let error = #expect(throws: SystemError.self) { try FileSystem.makeDirectory(dir.at("two/three")) }
        #expect(error?.errno == ENOENT)
        #expect(error?.subject == dir.at("two/three"))
        #expect(!dir.exists("two"))
    }

    @Test func statusOfAMissingPathIsNil() throws {
        let dir = TempDirectory()
        #expect(try FileSystem.status(dir.at("missing")) == nil)
        #expect(try FileSystem.status(dir.at("missing/below")) == nil)
        dir.write("file", "x")
        #expect(try FileSystem.status(dir.at("file/below")) == nil)  // ENOTDIR
    }

    @Test func statusDescribesFilesDirectoriesAndLinksWithoutFollowing() throws {
        let dir = TempDirectory()
        let file = dir.write("file", "12345")
        dir.link("link", to: file)
        dir.link("dangling", to: dir.at("nowhere"))
        let f = try #require(try FileSystem.status(file))
        #expect(f.isRegular && f.size == 5 && f.links == 1 && f.owner == geteuid())
        let l = try #require(try FileSystem.status(dir.at("link")))
        #expect(l.isSymbolicLink && !l.isRegular)
        #expect(!l.isSameFile(as: f))
        #expect(try FileSystem.status(dir.at("dangling"))?.isSymbolicLink == true)
        #expect(try FileSystem.status(dir.path)?.isDirectory == true)
        #expect(link(file, dir.at("hard")) == 0)
        let hard = try #require(try FileSystem.status(dir.at("hard")))
        #expect(hard.isSameFile(as: f))
        #expect(hard.links == 2)
    }

    @Test(.enabled(if: geteuid() != 0, "root passes every permission check"))
    func statusOfAnUnsearchableDirectoryThrows() throws {
        let dir = TempDirectory()
        let locked = dir.makeDirectory("locked", mode: 0o700)
        dir.write("locked/file", "x")
        #expect(chmod(locked, 0o000) == 0)
        let error = #expect(throws: SystemError.self) { try FileSystem.status(dir.at("locked/file")) }
        #expect(error?.call == "lstat")
        #expect(error?.errno == EACCES)
    }

    @Test func realPathResolvesLinksDotsAndDoubleSlashes() throws {
        let dir = TempDirectory()
        // /tmp itself may be a link: compare with what realpath says of the top.
        let top = try FileSystem.realPath(dir.path)
        #expect(top.hasPrefix("/") && !top.hasSuffix("/"))
        dir.makeDirectory("real")
        dir.makeDirectory("real/inner")
        dir.link("alias", to: "real")
        #expect(try FileSystem.realPath(dir.at("alias")) == top + "/real")
        #expect(try FileSystem.realPath(dir.at("alias/inner/..//./inner/")) == top + "/real/inner")
        #expect(try FileSystem.realPath(dir.at("real/inner/../..")) == top)
    }

    @Test func realPathOfAMissingPathIsENOENT() throws {
        let dir = TempDirectory()
        let missing = dir.at("missing")
        let error = #expect(throws: SystemError.self) { try FileSystem.realPath(missing) }
        #expect(error?.call == "realpath")
        #expect(error?.subject == missing)
        #expect(error?.errno == ENOENT)
    }

    @Test func directoryNameIsEverythingBeforeTheLastSlash() {
        #expect(FileSystem.directoryName(of: "/var/cache/cached/index.log") == "/var/cache/cached")
        #expect(FileSystem.directoryName(of: "/var") == "/")
        #expect(FileSystem.directoryName(of: "/") == "/")
        #expect(FileSystem.directoryName(of: "file") == ".")
        #expect(FileSystem.directoryName(of: "") == ".")
        #expect(FileSystem.directoryName(of: "a/b") == "a")
        #expect(FileSystem.directoryName(of: "./b") == ".")
    }

    @Test func listGivesTheNamesWithoutDotAndDotDot() throws {
        let dir = TempDirectory()
        #expect(try FileSystem.list(dir.path) == [])
        dir.write("b", "")
        dir.makeDirectory("a")
        dir.link("c", to: "nowhere")
        #expect(try FileSystem.list(dir.path).sorted() == ["a", "b", "c"])
        let error = #expect(throws: SystemError.self) { try FileSystem.list(dir.at("missing")) }
        #expect(error?.call == "opendir")
        #expect(error?.errno == ENOENT)
    }

    @Test func readReadsAWholeFileAndRefusesALink() throws {
        let dir = TempDirectory()
        let bytes = pattern(150_000, seed: 1)
        let file = dir.write("file", bytes)
        #expect(try FileSystem.read(file) == bytes)
        #expect(try FileSystem.read(file, limit: 100) == Array(bytes[0..<100]))
        let link = dir.link("link", to: file)
        let error = #expect(throws: SystemError.self) { try FileSystem.read(link) }
        #expect(error?.errno == ELOOP)
        #expect(error?.subject == link)
    }

    @Test func unlinkRemovesAndAMissingFileIsNoError() throws {
        let dir = TempDirectory()
        let file = dir.write("file", "x")
        try FileSystem.unlink(file)
        #expect(!dir.exists("file"))
        try FileSystem.unlink(file)
        dir.makeDirectory("sub")
        let error = #expect(throws: SystemError.self) { try FileSystem.unlink(dir.at("sub")) }
        #expect(error?.call == "unlink")
        #expect(error?.errno == EISDIR)
    }

    @Test func renameMovesAndItsErrorNamesBothPaths() throws {
        let dir = TempDirectory()
        let from = dir.write("from", "payload")
        try FileSystem.rename(from, dir.at("to"))
        #expect(dir.names() == ["to"])
        #expect(dir.contents("to") == Array("payload".utf8))
        let error = #expect(throws: SystemError.self) { try FileSystem.rename(from, dir.at("again")) }
        #expect(error?.subject == "\(from) -> \(dir.at("again"))")
        #expect(error?.errno == ENOENT)
    }

    @Test func syncDirectoryOfAMissingDirectoryThrows() throws {
        let dir = TempDirectory()
        try FileSystem.syncDirectory(dir.path)
        let error = #expect(throws: SystemError.self) { try FileSystem.syncDirectory(dir.at("missing")) }
        #expect(error?.call == "open")
        #expect(error?.errno == ENOENT)
    }

    @Test func tempNamesAreUniqueAndCarryTheSuffix() {
        let names = (0..<1000).map { _ in TempName.next() }
        #expect(Set(names).count == 1000)
        #expect(names.allSatisfy { $0.hasSuffix(".tmp") && $0.hasPrefix("\(getpid())-") && !$0.contains("/") })
        #expect(TempName.next(".part").hasSuffix(".part"))
    }
}
