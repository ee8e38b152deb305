#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import CacheSystem

/// Paths resolved beneath an open directory, never through a symbolic link.
@Suite struct ConfinedDirectoryTests {
    /// A temp directory with `store/` (the confined one) holding
    /// `sub/file` and `top`, and `outside/secret` next to it.
    private struct Layout {
        let temp = TempDirectory()
        let store: String
        let confined: ConfinedDirectory
        init() throws {
            store = temp.makeDirectory("store")
            temp.makeDirectory("store/sub")
            temp.write("store/sub/file", "inner")
            temp.write("store/top", "top")
            temp.makeDirectory("outside")
            temp.write("outside/secret", "secret")
            confined = try ConfinedDirectory(opening: store)
        }
        func read(_ p: String) throws(SystemError) -> String {
            String(decoding: try confined.read(p), as: UTF8.self)
        }
    }

    /// The SystemError `body` throws; nil (and an issue) when it throws nothing else.
    private func refusal(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> SystemError? {
        do { try body() } catch let error as SystemError { return error } catch {
            Issue.record("not a SystemError: \(error)", sourceLocation: sourceLocation)
        }
        return nil
    }

    @Test func pathsBeneathOpenRelativeOrAbsolute() throws {
        let l = try Layout()
        defer { l.confined.close() }
        #expect(l.confined.path == l.store)
        #expect(try l.read("top") == "top")
        #expect(try l.read("sub/file") == "inner")
        #expect(try l.read("sub//file") == "inner")
        #expect(try l.read("./sub/./file") == "inner")
        #expect(try l.read(l.store + "/sub/file") == "inner")
        let fd = try l.confined.open("sub/file", .readOnly)
        defer { fd.close() }
        #expect(fd.path == "sub/file")
        #expect(fcntl(fd.rawValue, F_GETFD) & FD_CLOEXEC == FD_CLOEXEC)
        // The directory itself, by its own path or as ".".
        #expect(try l.confined.list(l.store).map(\.name).sorted() == ["sub", "top"])
        #expect(try l.confined.list(".").map(\.name).sorted() == ["sub", "top"])
        #expect(try l.confined.list("sub") == [ConfinedDirectory.Entry(name: "file", kind: .regular)])
    }

    @Test func creatingBeneathUsesTheModeAndStaysInside() throws {
        let l = try Layout()
        defer { l.confined.close() }
        let fd = try l.confined.open("sub/new", [.writeOnly, .create, .exclusive], mode: 0o600)
        try fd.writeAll(Array("fresh".utf8))
        fd.close()
        #expect(l.temp.contents("store/sub/new") == Array("fresh".utf8))
        #expect(permissions(l.temp.at("store/sub/new")) == 0o600)
    }

    @Test func aLinkAsTheLastComponentIsRefusedEvenPointingInside() throws {
        let l = try Layout()
        defer { l.confined.close() }
        l.temp.link("store/to-outside", to: l.temp.at("outside/secret"))
        l.temp.link("store/to-inside", to: "top")
        for name in ["to-outside", "to-inside", l.store + "/to-outside"] {
            let error = refusal { _ = try l.read(name) }
            #expect(error?.errno == ELOOP, "\(name)")
            #expect(error?.subject == name)
        }
    }

    @Test func aLinkAsAMiddleDirectoryIsRefused() throws {
        let l = try Layout()
        defer { l.confined.close() }
        l.temp.link("store/outdir", to: l.temp.at("outside"))
        l.temp.link("store/indir", to: "sub")
        l.temp.link("store/sub/up", to: "..")
        for name in ["outdir/secret", "indir/file", "sub/up/top", "sub/up/sub/file"] {
            let error = refusal { _ = try l.read(name) }
            #expect(error != nil, "\(name) was opened")
            #expect(error?.errno == ELOOP || error?.errno == ENOTDIR, "\(name): \(String(describing: error))")
        }
        // Listing or making a directory through the link is refused too.
        #expect(refusal { _ = try l.confined.list("outdir") } != nil)
        #expect(refusal { try l.confined.makeDirectory("outdir/planted") } != nil)
        #expect(!l.temp.exists("outside/planted"))
    }

    @Test func creatingThroughADanglingLinkCreatesNothingOutside() throws {
        let l = try Layout()
        defer { l.confined.close() }
        l.temp.link("store/trap", to: l.temp.at("outside/created"))
        let error = refusal { _ = try l.confined.open("trap", [.writeOnly, .create], mode: 0o600) }
        #expect(error?.errno == ELOOP)
        #expect(!l.temp.exists("outside/created"))
        let durable = refusal { try l.confined.writeDurably(Array("x".utf8), to: "trap/x", tempDirectory: "sub") }
        #expect(durable != nil)
        #expect(l.temp.names(in: "outside") == ["secret"])
        #expect(l.temp.names(in: "store/sub") == ["file"])
    }

    @Test func dotDotIsRefusedWhereverItIs() throws {
        let l = try Layout()
        defer { l.confined.close() }
        for name in ["../outside/secret", "sub/../top", "sub/..", "..", l.store + "/../outside/secret", l.store + "/sub/../top"] {
            let error = refusal { _ = try l.read(name) }
            #expect(error?.errno == EXDEV, "\(name)")
            #expect(error?.call == "resolve")
            #expect(error?.subject == name)
        }
        // A name that merely starts with dots is an ordinary name.
        l.temp.write("store/..data", "dots")
        #expect(try l.read("..data") == "dots")
    }

    @Test func anAbsolutePathOutsideIsRefused() throws {
        let l = try Layout()
        defer { l.confined.close() }
        // A sibling whose name extends the store's is outside too.
        l.temp.makeDirectory("store2")
        l.temp.write("store2/file", "sibling")
        for name in [l.temp.at("outside/secret"), l.store + "2/file", "/etc/passwd", "/"] {
            let error = refusal { _ = try l.read(name) }
            #expect(error?.errno == EXDEV, "\(name)")
            #expect(error?.subject == name)
        }
        #expect(refusal { try l.confined.unlink(l.temp.at("outside/secret")) }?.errno == EXDEV)
        #expect(refusal { try l.confined.rename("top", l.temp.at("outside/moved")) }?.errno == EXDEV)
        #expect(l.temp.names(in: "outside") == ["secret"])
        #expect(l.temp.names(in: "store") == ["sub", "top"])
    }

    @Test func theDirectoryItselfMustNotBeALink() throws {
        let temp = TempDirectory()
        let real = temp.makeDirectory("real")
        let link = temp.link("alias", to: real)
        let error = #expect(throws: SystemError.self) { try ConfinedDirectory(opening: link) }
        // O_DIRECTORY | O_NOFOLLOW on a link: Linux says ENOTDIR.
        #expect(error?.errno == ENOTDIR || error?.errno == ELOOP)
        #expect(error?.subject == link)
        let file = temp.write("file", "x")
        #expect(throws: SystemError.self) { try ConfinedDirectory(opening: file) }
        #expect(throws: SystemError.self) { try ConfinedDirectory(opening: temp.at("missing")) }
    }

    @Test func makeDirectorySaysWhetherItCreatedAndRefusesALink() throws {
        let l = try Layout()
        defer { l.confined.close() }
        #expect(try l.confined.makeDirectory("sub/made", mode: 0o700))
        #expect(try l.confined.makeDirectory("sub/made") == false)
        #expect(try FileSystem.status(l.temp.at("store/sub/made"))?.isDirectory == true)
        l.temp.link("store/linkdir", to: l.temp.at("outside"))
        let error = refusal { try l.confined.makeDirectory("linkdir") }
        #expect(error?.errno == ELOOP)
        let onFile = refusal { try l.confined.makeDirectory("top") }
        #expect(onFile?.errno == ENOTDIR)
        #expect(refusal { try l.confined.makeDirectory(".") }?.errno == EINVAL)
    }

    @Test func statusSeesTheLinkItselfAndNilForMissing() throws {
        let l = try Layout()
        defer { l.confined.close() }
        l.temp.link("store/link", to: l.temp.at("outside/secret"))
        #expect(try l.confined.status("link")?.isSymbolicLink == true)
        #expect(try l.confined.status("top")?.size == 3)
        #expect(try l.confined.status("sub")?.isDirectory == true)
        #expect(try l.confined.status("missing") == nil)
        #expect(try l.confined.status("missing/below") == nil)
        #expect(try l.confined.status("top/below") == nil)
        #expect(refusal { _ = try l.confined.status("../outside/secret") }?.errno == EXDEV)
    }

    @Test func unlinkRemovesTheLinkNotItsTarget() throws {
        let l = try Layout()
        defer { l.confined.close() }
        l.temp.link("store/sub/link", to: l.temp.at("outside/secret"))
        try l.confined.unlink("sub/link")
        #expect(l.temp.names(in: "store/sub") == ["file"])
        #expect(l.temp.contents("outside/secret") == Array("secret".utf8))
        try l.confined.unlink("sub/link")  // missing: no error
        l.temp.link("store/outdir", to: l.temp.at("outside"))
        #expect(refusal { try l.confined.unlink("outdir/secret") } != nil)
        #expect(l.temp.exists("outside/secret"))
    }

    @Test func renameAndLinkActBeneath() throws {
        let l = try Layout()
        defer { l.confined.close() }
        try l.confined.rename("top", "sub/moved")
        #expect(l.temp.names(in: "store") == ["sub"])
        #expect(try l.read("sub/moved") == "top")
        try l.confined.link("sub/moved", "second")
        #expect(try l.confined.status("second")?.links == 2)
        let error = refusal { try l.confined.rename("missing", "elsewhere") }
        #expect(error?.call == "rename")
        #expect(error?.subject == "missing -> elsewhere")
        #expect(error?.errno == ENOENT)
        l.temp.link("store/outdir", to: l.temp.at("outside"))
        #expect(refusal { try l.confined.rename("second", "outdir/stolen") } != nil)
        #expect(refusal { try l.confined.link("second", "outdir/stolen") } != nil)
        #expect(l.temp.names(in: "outside") == ["secret"])
    }

    @Test func writeDurablyBeneathLeavesTheBytesAndNoTemp() throws {
        let l = try Layout()
        defer { l.confined.close() }
        try l.confined.makeDirectory("tmp")
        let bytes = pattern(90_000, seed: 5)
        try l.confined.writeDurably(bytes, to: "sub/file", tempDirectory: "tmp", mode: 0o600)
        #expect(l.temp.contents("store/sub/file") == bytes)
        #expect(permissions(l.temp.at("store/sub/file")) == 0o600)
        #expect(l.temp.names(in: "store/tmp") == [])
        try l.confined.writeDurably(Array("abs".utf8), to: l.store + "/top", tempDirectory: l.store + "/tmp")
        #expect(l.temp.contents("store/top") == Array("abs".utf8))
        #expect(l.temp.names(in: "store/tmp") == [])
    }

    @Test func readStopsAtItsLimit() throws {
        let l = try Layout()
        defer { l.confined.close() }
        #expect(try l.confined.read("sub/file", limit: 3) == Array("inn".utf8))
        try l.confined.syncDirectory("sub")
        #expect(refusal { try l.confined.syncDirectory("top") }?.errno == ENOTDIR)
    }

    /// A listing says what each entry is, links not followed, with no call
    /// per entry; a limit stops the reading.
    @Test func aListingGivesEachEntrysKind() throws {
        let l = try Layout()
        defer { l.confined.close() }
        #expect(symlink(l.temp.at("outside/secret"), l.store + "/link") == 0)
        #expect(mkfifo(l.store + "/fifo", 0o600) == 0)
        let kinds = Dictionary(uniqueKeysWithValues: try l.confined.list(".").map { ($0.name, $0.kind) })
        #expect(kinds == ["sub": .directory, "top": .regular, "link": .symbolicLink, "fifo": .special])
        #expect(try l.confined.list(".", limit: 2).count == 2)
    }

    /// Where the file system leaves `d_type` unknown, the entry is looked up
    /// in the open directory (not following a link); one gone meanwhile is skipped.
    @Test func anUnknownTypeIsLookedUp() throws {
        let l = try Layout()
        defer { l.confined.close() }
        #expect(symlink("sub", l.store + "/link") == 0)
        let fd = l.confined.descriptor.rawValue
        let unknown = UInt8(DT_UNKNOWN)
        #expect(try ConfinedDirectory.kind(dType: unknown, of: "sub", in: fd, display: ".") == .directory)
        #expect(try ConfinedDirectory.kind(dType: unknown, of: "top", in: fd, display: ".") == .regular)
        #expect(try ConfinedDirectory.kind(dType: unknown, of: "link", in: fd, display: ".") == .symbolicLink)
        #expect(try ConfinedDirectory.kind(dType: unknown, of: "gone", in: fd, display: ".") == nil)
        #expect(try ConfinedDirectory.kind(dType: UInt8(DT_FIFO), of: "top", in: fd, display: ".") == .special)
    }
}

@Suite struct ConfinedPathTests {
    @Test(arguments: [
        ("/s/objects/ab/cd", "objects/ab/cd"), ("/s/a", "a"), ("objects/ab", "objects/ab"), ("a", "a"),
        ("/s", nil), ("/s/", nil), ("/s//a", nil), ("/s/a/", nil), ("/s/./a", nil), ("/s/a/..", nil), ("/s/../x", nil),
        ("/sx/a", nil), ("/t/a", nil), ("a//b", nil), ("./a", nil), ("a/../b", nil), ("", nil), ("/s/.a/..b", ".a/..b"),
    ] as [(String, String?)])
    func plainPathsNeedNoSplitting(_ p: String, _ expected: String?) {
        #expect(ConfinedDirectory.plainSuffix(p, under: "/s") == expected, "\(p)")
    }
}

/// The open flags by name are open(2)'s own bits.
@Suite struct OpenFlagsTests {
    @Test func eachNameIsItsFlag() {
        #expect(OpenFlags.readOnly.rawValue == O_RDONLY)
        #expect(OpenFlags([.writeOnly, .create, .exclusive]).rawValue == O_WRONLY | O_CREAT | O_EXCL)
        #expect(OpenFlags([.readWrite, .append]).rawValue == O_RDWR | O_APPEND)
        #expect(OpenFlags([.directory, .noFollow, .nonBlocking, .noControllingTerminal, .truncate]).rawValue
                == O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_TRUNC)
        #expect(OpenFlags.pathOnly.rawValue == 0o10000000, "O_PATH on Linux")
    }
}
