#if canImport(Glibc)
import Glibc
#endif
import Testing
import CacheSystem

@Suite struct FileDescriptorTests {
    @Test func openingAMissingFileNamesTheCallThePathAndENOENT() throws {
        let dir = TempDirectory()
        let missing = dir.at("no-such-file")
        let error = #expect(throws: SystemError.self) { try FileDescriptor.open(missing, .readOnly) }
        #expect(error?.call == "open")
        #expect(error?.subject == missing)
        #expect(error?.errno == ENOENT)
        #expect(error?.isNoSpace == false)
        #expect(error?.description == "open(\(missing)): No such file or directory (errno \(ENOENT))")
    }

    @Test func exclusiveCreateOfAnExistingFileIsEEXIST() throws {
        let dir = TempDirectory()
        let path = dir.write("present", "x")
        let error = #expect(throws: SystemError.self) { try FileDescriptor.open(path, [.writeOnly, .create, .exclusive]) }
        #expect(error?.errno == EEXIST)
        #expect(error?.subject == path)
        #expect(dir.contents("present") == Array("x".utf8))
    }

    @Test func createdFilesGetTheModeAndAreCloseOnExec() throws {
        let dir = TempDirectory()
        let path = dir.at("new")
        let fd = try FileDescriptor.open(path, [.writeOnly, .create, .exclusive], mode: 0o600)
        defer { fd.close() }
        #expect(fd.path == path)
        #expect(permissions(path) == 0o600)
        #expect(fcntl(fd.rawValue, F_GETFD) & FD_CLOEXEC == FD_CLOEXEC)
        let status = try fd.status()
        #expect(status.isRegular)
        #expect(!status.isDirectory && !status.isSymbolicLink && !status.isSocket)
        #expect(status.size == 0)
        #expect(status.links == 1)
        #expect(status.owner == geteuid())
    }

    @Test func writeAllThenReadToEndGivesTheSameBytes() throws {
        let dir = TempDirectory()
        let path = dir.at("data")
        // More than readToEnd's 64 KiB chunk, and not a multiple of it.
        let bytes = pattern(200_003)
        let fd = try FileDescriptor.open(path, [.readWrite, .create, .exclusive])
        defer { fd.close() }
        try fd.writeAll(bytes)
        #expect(try fd.size() == 200_003)
        #expect(try fd.status().size == 200_003)
        #expect(dir.contents("data") == bytes)

        #expect(try fd.seek(to: 0) == 0)
        #expect(try fd.readToEnd() == bytes)
        // At the end: nothing more, and read says 0.
        #expect(try fd.readToEnd() == [])
        var one = [UInt8](repeating: 0, count: 16)
        #expect(try one.withUnsafeMutableBytes { (raw) throws(SystemError) in try fd.read(into: raw) } == 0)
    }

    @Test func readToEndStopsAtItsLimit() throws {
        let dir = TempDirectory()
        let bytes = pattern(100_000, seed: 7)
        let path = dir.write("data", bytes)
        let fd = try FileDescriptor.open(path, .readOnly)
        defer { fd.close() }
        #expect(try fd.readToEnd(limit: 70_000) == Array(bytes[0..<70_000]))
        #expect(try fd.seek(to: 0) == 0)
        #expect(try fd.readToEnd(limit: 10) == Array(bytes[0..<10]))
    }

    @Test func readMovesThePositionAndSeekPlacesIt() throws {
        let dir = TempDirectory()
        let path = dir.write("data", "0123456789")
        let fd = try FileDescriptor.open(path, .readOnly)
        defer { fd.close() }
        var buffer = [UInt8](repeating: 0, count: 4)
        #expect(try buffer.withUnsafeMutableBytes { (raw) throws(SystemError) in try fd.read(into: raw) } == 4)
        #expect(buffer == Array("0123".utf8))
        #expect(try fd.readToEnd() == Array("456789".utf8))
        #expect(try fd.seek(to: 3) == 3)
        #expect(try fd.readToEnd() == Array("3456789".utf8))
        #expect(try fd.seek(to: -2, whence: SEEK_END) == 8)
        #expect(try fd.readToEnd() == Array("89".utf8))
        let error = #expect(throws: SystemError.self) { try fd.seek(to: -1) }
        #expect(error?.call == "lseek")
        #expect(error?.errno == EINVAL)
        #expect(error?.subject == path)
    }

    @Test func truncateShrinksAndGrowsWithZeros() throws {
        let dir = TempDirectory()
        let path = dir.write("data", pattern(1000, seed: 3))
        let fd = try FileDescriptor.open(path, .readWrite)
        defer { fd.close() }
        try fd.truncate(to: 10)
        #expect(try fd.size() == 10)
        #expect(dir.contents("data") == Array(pattern(1000, seed: 3)[0..<10]))
        try fd.truncate(to: 20)
        #expect(try fd.size() == 20)
        #expect(dir.contents("data") == Array(pattern(1000, seed: 3)[0..<10]) + [UInt8](repeating: 0, count: 10))
        try fd.truncate(to: 0)
        #expect(try fd.size() == 0)
        #expect(dir.contents("data") == [])
    }

    @Test func truncateOfAReadOnlyDescriptorFailsWithTheCallAndPath() throws {
        let dir = TempDirectory()
        let path = dir.write("data", "abc")
        let fd = try FileDescriptor.open(path, .readOnly)
        defer { fd.close() }
        let error = #expect(throws: SystemError.self) { try fd.truncate(to: 0) }
        #expect(error?.call == "ftruncate")
        #expect(error?.subject == path)
        #expect(error?.errno == EINVAL || error?.errno == EBADF)
        #expect(dir.contents("data") == Array("abc".utf8))
    }

    @Test func writingToAReadOnlyDescriptorIsEBADF() throws {
        let dir = TempDirectory()
        let path = dir.write("data", "abc")
        let fd = try FileDescriptor.open(path, .readOnly)
        defer { fd.close() }
        let error = #expect(throws: SystemError.self) { try fd.writeAll(Array("xyz".utf8)) }
        #expect(error?.call == "write")
        #expect(error?.subject == path)
        #expect(error?.errno == EBADF)
        #expect(dir.contents("data") == Array("abc".utf8))
    }

    @Test func writeAllOfNothingWritesNothing() throws {
        let dir = TempDirectory()
        let path = dir.write("data", "keep")
        let fd = try FileDescriptor.open(path, [.writeOnly, .append])
        defer { fd.close() }
        try fd.writeAll([])
        try fd.writeAll(Array("!".utf8))
        #expect(dir.contents("data") == Array("keep!".utf8))
    }

    @Test func syncSucceedsOnFilesAndDirectories() throws {
        let dir = TempDirectory()
        let path = dir.write("data", "abc")
        let file = try FileDescriptor.open(path, .readWrite)
        defer { file.close() }
        try file.writeAll(Array("def".utf8))
        try file.sync()
        let directory = try FileDescriptor.openDirectory(dir.path)
        defer { directory.close() }
        try directory.sync()
        #expect(try directory.status().isDirectory)
        #expect(dir.contents("data") == Array("def".utf8))
    }

    @Test func openDirectoryOfAFileIsENOTDIR() throws {
        let dir = TempDirectory()
        let path = dir.write("file", "x")
        let error = #expect(throws: SystemError.self) { try FileDescriptor.openDirectory(path) }
        #expect(error?.errno == ENOTDIR)
        #expect(error?.subject == path)
    }

    @Test func statusOfAnOpenFileSeesItsDeletion() throws {
        let dir = TempDirectory()
        let path = dir.write("data", "abc")
        let fd = try FileDescriptor.open(path, .readOnly)
        defer { fd.close() }
        let before = try fd.status()
        #expect(before.links == 1)
        #expect(unlink(path) == 0)
        let after = try fd.status()
        #expect(after.links == 0)
        #expect(after.isSameFile(as: before))
        #expect(after.size == 3)
    }

    @Test func closeTwiceIsHarmlessAndTheDescriptorIsGone() throws {
        let dir = TempDirectory()
        let path = dir.write("data", "abc")
        let opened = try FileDescriptor.open(path, .readOnly)
        // The test process is threaded: a number freed by close() could be
        // reused at once by another test, and a second close() would then
        // close that one. Work on a high number nobody is handed instead
        // (the kernel always gives the lowest free one).
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let high = Int32(min(Int(limit.rlim_cur), 4096) - 7)
        try #require(high > 100)
        try #require(fcntl(high, F_GETFD) == -1, "descriptor \(high) is already in use")
        try #require(dup2(opened.rawValue, high) == high)
        opened.close()
        let fd = FileDescriptor(rawValue: high, path: path)
        #expect(fcntl(high, F_GETFD) != -1)
        fd.close()
        #expect(fcntl(high, F_GETFD) == -1 && errno == EBADF)
        fd.close()  // a second close: no crash, no effect
        #expect(fcntl(high, F_GETFD) == -1 && errno == EBADF)
        var buffer = [UInt8](repeating: 0, count: 4)
        let error = #expect(throws: SystemError.self) {
            _ = try buffer.withUnsafeMutableBytes { (raw) throws(SystemError) in try fd.read(into: raw) }
        }
        #expect(error?.call == "read")
        #expect(error?.subject == path)
        #expect(error?.errno == EBADF)
    }

    @Test func anExclusiveLockIsHeldAgainstAnotherOpenOfTheSameFile() throws {
        let dir = TempDirectory()
        let path = dir.write("lock", "")
        let first = try FileDescriptor.open(path, .readOnly)
        let second = try FileDescriptor.open(path, .readOnly)
        defer { second.close() }
        #expect(try first.tryLockExclusive())
        #expect(try first.tryLockExclusive())  // the holder may take it again
        #expect(try second.tryLockExclusive() == false)
        first.close()  // closing releases it
        #expect(try second.tryLockExclusive())
    }

    @Test func setNonBlockingTurnsTheFlagOnAndOff() throws {
        let dir = TempDirectory()
        let path = dir.write("data", "")
        let fd = try FileDescriptor.open(path, .readOnly)
        defer { fd.close() }
        #expect(fcntl(fd.rawValue, F_GETFL) & O_NONBLOCK == 0)
        try fd.setNonBlocking()
        #expect(fcntl(fd.rawValue, F_GETFL) & O_NONBLOCK == O_NONBLOCK)
        try fd.setNonBlocking(false)
        #expect(fcntl(fd.rawValue, F_GETFL) & O_NONBLOCK == 0)
    }

    @Test func aSystemErrorWithoutSubjectReadsWithoutParentheses() {
        let error = SystemError("fsync", errno: EIO)
        #expect(error.description == "fsync: Input/output error (errno \(EIO))")
        #expect(SystemError("write", "/x", errno: ENOSPC).isNoSpace)
        #expect(SystemError("write", "/x", errno: EDQUOT).isNoSpace)
        #expect(!SystemError("write", "/x", errno: EIO).isNoSpace)
    }

    /// The reconciliation's read: an entry opened in its directory, its
    /// bytes compared as they come, whatever the buffer's size.
    @Test func holdsIsTrueForExactlyTheExpectedBytes() throws {
        let dir = TempDirectory()
        _ = dir.write("a.json", "{\"id\":1}")
        _ = dir.write("empty", "")
        let directory = try FileDescriptor.openDirectory(dir.path)
        defer { directory.close() }
        for size in [1, 3, 64] {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 8)
            defer { buffer.deallocate() }
            func holds(_ name: String, _ text: String) throws -> Bool {
                let fd = try directory.openEntry(name)
                defer { fd.close() }
                return try fd.holds(Array(text.utf8), buffer: buffer)
            }
            #expect(try holds("a.json", "{\"id\":1}"), "buffer of \(size)")
            #expect(try !holds("a.json", "{\"id\":2}"))
            #expect(try !holds("a.json", "{\"id\":1"), "the file is longer")
            #expect(try !holds("a.json", "{\"id\":1} "), "the file is shorter")
            #expect(try !holds("a.json", ""))
            #expect(try holds("empty", ""))
            #expect(try !holds("empty", "x"))
        }
        for name in ["", ".", "..", "x/a.json"] {
            #expect(throws: SystemError.self, "\(name)") { try directory.openEntry(name) }
        }
        #expect(symlink(dir.path + "/a.json", dir.path + "/link") == 0)
        #expect((#expect(throws: SystemError.self) { try directory.openEntry("link") })?.errno == ELOOP)
    }
}
