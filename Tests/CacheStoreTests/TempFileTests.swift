import Foundation
import Testing
@testable import CacheStore
import CacheSystem

private let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("temp file test body".utf8)

/// Downloads' temp files: unnamed (`O_TMPFILE`) where the filesystem has
/// them, named in `tmp/` otherwise, and spares created ahead of need.
@Suite struct TempFileTests {
    private func store(_ dir: TempDir, unnamed: Bool) throws -> Store {
        var c = StoreConfiguration(directory: dir.path)
        c.unnamedTempFiles = unnamed
        return try Store(c)
    }

    private func tmp(_ dir: TempDir) throws -> [String] { try FileSystem.list(dir.path + "/tmp") }

    private func written(_ bytes: [UInt8], _ store: Store) throws -> ObjectWriter {
        let w = try store.newObjectWriter(maxSize: 1 << 20)
        try bytes.withUnsafeBytes { try w.append($0) }
        return w
    }

    /// /tmp of the test machine is where the daemon's store usually is
    /// (ext4, tmpfs): both have O_TMPFILE, so the probe must find it.
    @Test func theProbeFindsUnnamedFilesOnThisFilesystem() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(dir, unnamed: true)
        defer { s.close() }
        #expect(s.unnamedTempFiles)
        #expect(try tmp(dir).isEmpty, "the probe's name is removed again")
        let off = TempDir(); defer { off.cleanup() }
        let named = try store(off, unnamed: false)
        defer { named.close() }
        #expect(!named.unnamedTempFiles)
    }

    /// A download in progress has no name anywhere; its commit gives it
    /// exactly one, under objects/, with every byte and the object mode.
    @Test(arguments: [true, false]) func aCommitPlacesTheBytesAndLeavesTmpEmpty(unnamed: Bool) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(dir, unnamed: unnamed)
        defer { s.close() }
        try s.replaceManifest([("a.png", nil)], validators: Validators())
        let w = try written(png, s)
        #expect(try tmp(dir).count == (unnamed ? 0 : 1))
        let ref = try s.commitObject(w, rows: [(0, "a.png")])
        #expect(try FileSystem.read(s.objectPath(ref.hash)) == png)
        let status = try #require(try FileSystem.status(s.objectPath(ref.hash)))
        #expect(status.mode & 0o777 == 0o644)
        #expect(status.links == 1)
        #expect(try tmp(dir).isEmpty)
        #expect(s.row(0)?.object?.hash == ref.hash)
        let (fd, size) = try s.openVerified(ref.hash)
        fd.close()
        #expect(size == Int64(png.count))
    }

    /// A discarded download (a failed transfer, bytes that are not an image) leaves nothing.
    @Test(arguments: [true, false]) func aDiscardedDownloadLeavesNothing(unnamed: Bool) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(dir, unnamed: unnamed)
        defer { s.close() }
        try written(Array("not an image".utf8), s).discard()
        try s.replaceManifest([("a.txt", nil)], validators: Validators())
        #expect(throws: StoreError.self) { _ = try s.commitObject(try written(Array("<html>".utf8), s), rows: [(0, "a.txt")]) }
        #expect(try tmp(dir).isEmpty)
        #expect(try FileSystem.list(dir.path + "/objects").allSatisfy { try FileSystem.list(dir.path + "/objects/" + $0).isEmpty })
    }

    /// A damaged file under the object's name: the new bytes replace it in
    /// one step (a link never replaces, so an unnamed file goes through a
    /// name in tmp/), and the damaged bytes are kept in quarantine/.
    @Test(arguments: [true, false]) func aDamagedCopyIsReplacedAndQuarantined(unnamed: Bool) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(dir, unnamed: unnamed)
        defer { s.close() }
        try s.replaceManifest([("a.png", nil)], validators: Validators())
        let probe = try written(png, s)
        let path = s.objectPath(probe.hash)
        probe.discard()
        var damaged = png
        damaged[9] ^= 1
        try FileSystem.makeDirectory(FileSystem.directoryName(of: path))
        try FileSystem.writeDurably(damaged, to: path, tempDirectory: dir.path + "/tmp")
        _ = try s.commitObject(try written(png, s), rows: [(0, "a.png")])
        #expect(try FileSystem.read(path) == png)
        let quarantined = try FileSystem.list(dir.path + "/quarantine")
        #expect(quarantined.count == 1)
        #expect(try FileSystem.read(dir.path + "/quarantine/" + quarantined[0]) == damaged)
        #expect(try tmp(dir).isEmpty)
    }

    /// Two downloads of the same bytes committed one after the other (the
    /// second finds the first's file): one object, the second's file dropped.
    @Test(arguments: [true, false]) func theSameBytesTwiceMakeOneObject(unnamed: Bool) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(dir, unnamed: unnamed)
        defer { s.close() }
        try s.replaceManifest([("a.png", nil), ("b.png", nil)], validators: Validators())
        let a = try s.commitObject(try written(png, s), rows: [(0, "a.png")])
        let b = try s.commitObject(try written(png, s), rows: [(1, "b.png")])
        #expect(a.hash == b.hash)
        #expect(try FileSystem.read(s.objectPath(a.hash)) == png)
        #expect(try tmp(dir).isEmpty)
    }

    /// Spares: created up to the count asked, handed out by
    /// `newObjectWriter`, removed down to the count asked and at close.
    @Test(arguments: [true, false]) func sparesAreKeptAtTheCountAskedAndRemovedAtClose(unnamed: Bool) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(dir, unnamed: unnamed)
        s.keepSpareObjectWriters(3)
        #expect(s.spareObjectWriters == 3)
        #expect(try tmp(dir).count == (unnamed ? 0 : 3))
        try s.replaceManifest([("a.png", nil)], validators: Validators())
        let w = try written(png, s)
        #expect(s.spareObjectWriters == 2, "a download takes a spare")
        let ref = try s.commitObject(w, rows: [(0, "a.png")])
        #expect(try FileSystem.read(s.objectPath(ref.hash)) == png)
        #expect(try tmp(dir).count == (unnamed ? 0 : 2))
        s.keepSpareObjectWriters(1)
        #expect(s.spareObjectWriters == 1)
        #expect(try tmp(dir).count == (unnamed ? 0 : 1))
        s.close()
        #expect(s.spareObjectWriters == 0)
        #expect(try tmp(dir).isEmpty)
        s.keepSpareObjectWriters(2)
        #expect(s.spareObjectWriters == 0, "none after close")
        #expect(try tmp(dir).isEmpty)
    }
}
