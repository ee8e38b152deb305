import Foundation
import Testing
@testable import CacheStore
import CacheSystem

private let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 7, count: 300_000)

private func commit(_ bytes: [UInt8], to store: Store, row: Int = 0) throws -> ObjectRef {
    let w = try store.newObjectWriter(maxSize: 1 << 24)
    try bytes.withUnsafeBytes { try w.append($0) }
    return try store.commitObject(w, rows: [(row, "a.png")])
}

/// `verify-reads`: what each mode hashes, how `auto` reads the mount table,
/// and read faults set aside once (docs/operations.md, "Verified reads and disk faults").
@Suite struct ReadVerificationTests {
    private func store(_ mode: VerifyReads, _ dir: TempDir) throws -> Store {
        var c = StoreConfiguration(directory: dir.path)
        c.verifyReads = mode
        let s = try Store(c)
        try s.replaceManifest([("a.png", nil)], validators: Validators())
        return s
    }

    @Test func alwaysHashesEveryRead() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(.always, dir); defer { s.close() }
        let ref = try commit(png, to: s)
        for _ in 0..<3 { try s.openVerified(ref.hash).0.close() }
        #expect(s.wholeHashes.withLock { $0 } == 3)
        #expect(s.openTrustedIfCached(ref.hash) == nil)
        #expect(s.readVerification.mode == .always)
    }

    /// A commit is trusted (its bytes were hashed as they were written); a
    /// `touch` moves ctime and the next read hashes again; bytes changed
    /// through the file system are caught; `rehash` always hashes.
    @Test func onChangeTrustsAnUnchangedFileOnly() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(.onChange, dir); defer { s.close() }
        let ref = try commit(png, to: s)
        for _ in 0..<3 { try s.openVerified(ref.hash).0.close() }
        #expect(s.wholeHashes.withLock { $0 } == 0, "a file hashed as it was written is trusted while unchanged")
        let opened = try #require(s.openTrustedIfCached(ref.hash))
        #expect(opened.1 == Int64(png.count))
        opened.0.close()

        try s.openVerified(ref.hash, rehash: true).0.close()
        #expect(s.wholeHashes.withLock { $0 } == 1)

        usleep(10_000)
        #expect(utimensat(AT_FDCWD, s.objectPath(ref.hash), nil, 0) == 0)
        try s.openVerified(ref.hash).0.close()
        #expect(s.wholeHashes.withLock { $0 } == 2, "a touched file is hashed again")
        try s.openVerified(ref.hash).0.close()
        #expect(s.wholeHashes.withLock { $0 } == 2, "and trusted again after")

        let fd = try FileDescriptor.open(s.objectPath(ref.hash), .writeOnly)
        try fd.writeAll([0x00])
        fd.close()
        #expect(s.openTrustedIfCached(ref.hash) == nil)
        guard case .corruptObject? = catchStore({ () throws(StoreError) in _ = try s.openVerified(ref.hash) }) else {
            Issue.record("a file changed through the file system was served"); return
        }
        #expect(s.row(0)?.object == nil)
    }

    /// A read error reported from outside (the event loop's sendfile) sets
    /// the file aside once: a second report of the same file, or of a file
    /// that has been replaced since, does nothing and is not counted again.
    @Test func aReadFaultIsHandledOnce() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(.always, dir); defer { s.close() }
        let ref = try commit(png, to: s)
        let path = Store.objectRelativePath(ref.hash)
        let fd = try FileDescriptor.open(s.objectPath(ref.hash), .readOnly)
        let identity = try fd.identity()
        fd.close()
        let eio = SystemError("sendfile", path, errno: EIO)
        guard case .unreadableObject(let hash, _, _, .moved(let to), let rows)? = s.readFailed(path: path, file: identity, eio) else {
            Issue.record("not set aside"); return
        }
        #expect(hash == ref.hash)
        #expect(rows == [0])
        #expect(to.hasPrefix(dir.path + "/quarantine/"))
        #expect(s.readErrors == 1)
        #expect(s.objectRef(ref.hash) == nil)
        #expect(try FileSystem.status(s.objectPath(ref.hash)) == nil)
        guard case .unreadableObject(_, _, _, .handledAlready, _)? = s.readFailed(path: s.objectPath(ref.hash), file: identity, eio) else {
            Issue.record("a second report acted again"); return
        }
        #expect(s.readErrors == 1)

        // The object back (a repair), then a stale report about the old file.
        let again = try commit(png, to: s)
        #expect(again.hash == ref.hash)
        guard case .unreadableObject(_, _, _, .handledAlready, _)? = s.readFailed(path: path, file: identity, eio) else {
            Issue.record("a report about a replaced file set the new one aside"); return
        }
        #expect(s.objectRef(ref.hash) != nil)
        #expect(s.readFailed(path: "objects/zz/not-an-object", file: nil, eio) == nil)
    }

    @Test func objectPathsMapBackToHashesOnly() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let s = try store(.always, dir); defer { s.close() }
        let h = Hash128(of: UnsafeRawBufferPointer(start: nil, count: 0))
        #expect(s.objectHash(ofPath: Store.objectRelativePath(h)) == h)
        #expect(s.objectHash(ofPath: s.objectPath(h)) == h)
        for bad in ["objects/" + h.hex, "posts/" + Store.objectRelativePath(h).dropFirst(8), "objects/AB/" + String(repeating: "0", count: 30),
                    "/elsewhere/" + Store.objectRelativePath(h), "objects/../objects/ab/" + String(repeating: "0", count: 30)] {
            #expect(s.objectHash(ofPath: String(bad)) == nil, "\(bad)")
        }
    }

    /// `auto` reads the mount holding the store from mountinfo: btrfs's
    /// `nodatasum` and `nodatacow` (mount or super-block options) turn it to always.
    @Test func mountOptionsComeFromTheLongestMountPoint() {
        let info = """
        22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
        43 22 0:39 / /srv/cache rw,relatime - btrfs /dev/loop0 rw,space_cache=v2,subvolid=5
        44 43 0:40 / /srv/cache/nodata rw,relatime - btrfs /dev/loop1 rw,nodatasum
        45 22 0:41 / /mnt/with\\040space rw,nodatacow - btrfs /dev/loop2 rw
        """
        #expect(ReadVerification.mountOptions(of: "/srv/cache/store/objects", in: info)?.contains("nodatasum") == false)
        #expect(ReadVerification.mountOptions(of: "/srv/cache/nodata/objects", in: info)?.contains("nodatasum") == true)
        #expect(ReadVerification.mountOptions(of: "/srv/cachex/objects", in: info)?.contains("relatime") == true)
        #expect(ReadVerification.mountOptions(of: "/mnt/with space/store", in: info)?.contains("nodatacow") == true)
        #expect(ReadVerification.mountOptions(of: "/srv/cache", in: info)?.contains("space_cache=v2") == true)
    }

    @Test func btrfsWhoseMountOptionsAreNotKnownIsHashedAlways() {
        let unknown = ReadVerification.onBtrfs(mountOptions: nil)
        #expect(unknown.mode == .always && !unknown.fileSystemChecksums)
        #expect(unknown.reason.contains("cannot be read"), "\(unknown.reason)")
        #expect(ReadVerification.onBtrfs(mountOptions: ["rw", "relatime", "space_cache=v2"]).mode == .onChange)
        #expect(ReadVerification.onBtrfs(mountOptions: ["rw", "relatime", "space_cache=v2"]).fileSystemChecksums)
        #expect(ReadVerification.onBtrfs(mountOptions: ["rw", "nodatasum"]).mode == .always)
        #expect(ReadVerification.onBtrfs(mountOptions: ["rw", "nodatacow"]).mode == .always)
        // No mount holds the path: not known either (the options are nil, not empty).
        #expect(ReadVerification.mountOptions(of: "relative/store", in: "22 1 8:1 / / rw - ext4 /dev/sda1 rw") == nil)
    }

    @Test func explicitModesNeedNoLookAtTheFileSystem() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let fd = try FileDescriptor.openDirectory(dir.path); defer { fd.close() }
        #expect(ReadVerification.resolve(.always, directory: fd, realPath: dir.path).mode == .always)
        #expect(ReadVerification.resolve(.onChange, directory: fd, realPath: dir.path).mode == .onChange)
        let auto = ReadVerification.resolve(.auto, directory: fd, realPath: dir.path)
        let type = try fd.fileSystemType()
        #expect(auto.mode == (type == ReadVerification.btrfsMagic || type == ReadVerification.zfsMagic ? .onChange : .always), "\(auto)")
    }
}

private func catchStore(_ body: () throws(StoreError) -> Void) -> StoreError? {
    do { try body(); return nil } catch { return error }
}
