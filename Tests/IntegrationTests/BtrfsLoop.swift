import Foundation

/// A btrfs file system (256 MiB, sparse) on a loop device, made in a scratch
/// directory of its own and mounted there; `rot(file:)` damages one block of
/// a file on the device underneath, as a bad sector would, and proves that
/// the kernel now answers reads of that block with `EIO`. Always unmounted
/// (lazily) and its loop device detached at the end (deinit), even when a
/// test fails. Needs root, btrfs in the kernel, `mkfs.btrfs` (btrfs-progs)
/// and loop devices: where one is missing, `unavailableReason` says which.
final class BtrfsLoop {
    /// The size of a data block: btrfs checksums each one (its sector size).
    static let blockSize = 4096
    static let imageBytes = 256 << 20
    static let mkfsCandidates = ["/usr/sbin/mkfs.btrfs", "/sbin/mkfs.btrfs"]

    /// Why no btrfs can be mounted on a loop device here, or nil when one can
    /// (checked once per test process).
    static let unavailableReason: String? = findUnavailableReason()

    /// Whether btrfs can be mounted: a suite's condition, asked only when it
    /// is about to run; the reason it cannot is printed then, once.
    static var isAvailable: Bool { announcedReason == nil }

    private static let announcedReason: String? = {
        if let unavailableReason { print("BtrfsLoop: the btrfs disk-fault tests are skipped: \(unavailableReason)") }
        return unavailableReason
    }()

    private static func findUnavailableReason() -> String? {
        if geteuid() != 0 { return "not root (uid \(geteuid())): mounting a loop device needs root" }
        let filesystems = (try? String(contentsOfFile: "/proc/filesystems", encoding: .utf8)) ?? ""
        let names = filesystems.split(separator: "\n").compactMap { $0.split(whereSeparator: \.isWhitespace).last }
        if !names.contains("btrfs") { return "the kernel has no btrfs: it is not in /proc/filesystems (modprobe btrfs)" }
        if mkfs == nil { return "mkfs.btrfs is not installed (apt-get install btrfs-progs; make test installs it)" }
        if !FileManager.default.fileExists(atPath: "/dev/loop-control") {
            return "no loop devices: /dev/loop-control does not exist (modprobe loop)"
        }
        return nil
    }

    static var mkfs: String? { mkfsCandidates.first { FileManager.default.isExecutableFile(atPath: $0) } }

    let scratch = Scratch()
    let image: String
    let mountPoint: String

    /// Makes the image, its file system, and mounts it (mode 0700).
    init() throws {
        image = scratch.path + "/btrfs.img"
        mountPoint = scratch.path + "/mnt"
        if let reason = Self.unavailableReason { throw HarnessError("btrfs cannot be mounted: \(reason)") }
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
        guard FileManager.default.createFile(atPath: image, contents: nil), truncate(image, Self.imageBytes) == 0 else {
            throw HarnessError("cannot make the sparse image \(image): \(String(cString: strerror(errno)))")
        }
        try Self.run(Self.mkfs ?? "mkfs.btrfs", ["-q", "-f", "-d", "single", image])
        try Self.run("/bin/mount", ["-t", "btrfs", "-o", "loop", image, mountPoint])
        guard chmod(mountPoint, 0o700) == 0 else {
            let reason = String(cString: strerror(errno))
            unmount()
            throw HarnessError("chmod 0700 \(mountPoint): \(reason)")
        }
    }

    deinit { unmount() }

    /// True while the mount point is a mount (per /proc/self/mountinfo).
    var isMounted: Bool {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        return text.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 4 && fields[4] == mountPoint
        }
    }

    /// A lazy unmount (the daemon may still hold files), then every loop
    /// device still backed by this image detached (`losetup -j` names only
    /// those: never another test's or another user's).
    func unmount() {
        if isMounted { _ = try? runProgram("/bin/umount", ["-l", mountPoint]) }
        guard let listing = try? runProgram("/sbin/losetup", ["-j", image]), listing.status == 0 else { return }
        for line in listing.output.split(separator: "\n") {
            guard let device = line.split(separator: ":").first, device.hasPrefix("/dev/loop") else { continue }
            _ = try? runProgram("/sbin/losetup", ["-d", String(device)])
        }
    }

    /// Runs a tool; a failure is thrown with its output.
    private static func run(_ tool: String, _ arguments: [String]) throws {
        let (status, output) = try runProgram(tool, arguments)
        guard status == 0 else {
            throw HarnessError("\(([tool] + arguments).joined(separator: " ")) failed (exit \(status)): \(output)")
        }
    }
}

/// Where `rot(file:)` damaged a file, proven to fail with `EIO` there.
struct Rot {
    /// The file on the mount, and its inode when it was damaged (the file
    /// that replaces it under the same name is another inode).
    var path: String
    var inode: UInt64
    /// The file offset of the damaged block (`BtrfsLoop.blockSize` bytes).
    var blockOffset: Int
    var block: Range<Int> { blockOffset..<(blockOffset + BtrfsLoop.blockSize) }
}

extension BtrfsLoop {
    /// Flips one byte, in the middle of `path`, on the device underneath the
    /// file system, drops the file's cached pages and proves the damage: a
    /// read of that block fails with `EIO` (btrfs's checksum) while the
    /// first block still reads its bytes. Thrown when it cannot be proven,
    /// so that no test passes because the rot missed.
    func rot(file path: String) throws -> Rot {
        var attempt = 1
        while true {
            do { return try rotOnce(path) } catch let e as Replaced {
                // The daemon replaced the file meanwhile (a repair finishing):
                // its new inode is rotted.
                if attempt >= 4 { throw HarnessError("\(path) was replaced \(attempt) times while it was being rotted: \(e)") }
            } catch let e as NotTaken {
                // Seen under load, one run in a few: the block still read
                // back after 2 s of dropping its pages. Once more, from the
                // top (a byte flipped already is not flipped back).
                if attempt >= 4 { throw e.error }
                usleep(500_000)
            }
            attempt += 1
        }
    }

    /// The file was replaced (another inode) while it was being rotted.
    private struct Replaced: Error {}
    /// The flipped block still read back; `error` says how.
    private struct NotTaken: Error { var error: Error }

    private func rotOnce(_ path: String) throws -> Rot {
        // Read with pread, never mapped: a mapped page cannot be dropped.
        let original = try Self.readAll(path)
        guard original.count >= 4 * Self.blockSize else { throw HarnessError("\(path) is too small to rot (\(original.count) bytes)") }
        // 64 bytes inside one block in the middle of the file; the byte flipped is the 33rd.
        let runStart = (original.count / 2) / Self.blockSize * Self.blockSize + 1024
        let run = Array(original[runStart..<(runStart + 64)])
        let damaged = Rot(path: path, inode: try Self.inode(path), blockOffset: (runStart + 32) / Self.blockSize * Self.blockSize)
        try Self.flush(path)
        // Where the byte is on the device: the file's extent from FIEMAP
        // (filefrag; on btrfs its addresses are the file system's logical
        // ones), mapped to the device by btrfs-map-logical. (Searching the
        // image for the bytes found a stale copy now and then.)
        let target = runStart + 32
        let place = try devicePlace(of: path, at: target)
        var flipped = run
        flipped[32] ^= 0xFF
        let there = try imageBytes(at: place - 32, count: 64)
        if there == run {
            try flipByte(at: place)
        } else if there != flipped {
            throw HarnessError("\(path) byte \(target) is not at image offset \(place) (the bytes there differ)")
        }
        // A page sent with sendfile moments ago can stay referenced (so
        // cached) briefly: the cache is dropped again for up to 2 s.
        var tries = 0
        while true {
            guard (try? Self.inode(path)) == damaged.inode else { throw Replaced() }
            do {
                try prove(damaged, original: original)
                return damaged
            } catch where tries < 20 {
                tries += 1
                usleep(100_000)
            } catch {
                throw NotTaken(error: error)
            }
        }
    }

    /// The whole file, read with `pread`.
    private static func readAll(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw HarnessError("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(out.count)) }
            guard n >= 0 else { throw HarnessError("pread \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { return out }
            out += buffer[0..<n]
        }
    }

    /// The image offset of byte `offset` of the file at `path`.
    private func devicePlace(of path: String, at offset: Int) throws -> Int {
        let map = try runProgram("/usr/sbin/filefrag", ["-v", "-b1", path])
        guard map.status == 0 else { throw HarnessError("filefrag -v -b1 \(path): \(map.output)") }
        var logical: Int?
        for line in map.output.split(separator: "\n") {
            // "   0:        0..  102399:   13938688..  14041087: 102400: last,eof"
            let f = line.split(whereSeparator: { $0 == " " || $0 == ":" || $0 == "." }).map(String.init)
            guard f.count >= 5, Int(f[0]) != nil, let start = Int(f[1]), let end = Int(f[2]), let physical = Int(f[3]),
                  start <= offset, offset <= end else { continue }
            logical = physical + (offset - start)
        }
        guard let logical else { throw HarnessError("filefrag names no extent holding byte \(offset) of \(path): \(map.output)") }
        let device = try loopDevice()
        // btrfs-map-logical reads the extent tree from the device: the
        // transaction that holds the file's extent must be committed first.
        let committed = try runProgram("/bin/sync", ["-f", path])
        guard committed.status == 0 else { throw HarnessError("sync -f \(path): \(committed.output)") }
        // It looks the address up as an extent: the block's start.
        let blockStart = logical / Self.blockSize * Self.blockSize
        let mapped = try runProgram("/usr/bin/btrfs-map-logical", ["-l", String(blockStart), device])
        // "mirror 1 logical 13938688 physical 13938688 device /dev/loop0"
        let words = mapped.output.split(whereSeparator: \.isWhitespace).map(String.init)
        guard mapped.status == 0, let i = words.firstIndex(of: "physical"), i + 1 < words.count, let physical = Int(words[i + 1]) else {
            throw HarnessError("btrfs-map-logical -l \(blockStart) \(device): \(mapped.output)")
        }
        return physical + (logical - blockStart)
    }

    /// The loop device backed by the image.
    private func loopDevice() throws -> String {
        let listing = try runProgram("/sbin/losetup", ["-j", image])
        guard listing.status == 0, let device = listing.output.split(separator: ":").first, device.hasPrefix("/dev/loop") else {
            throw HarnessError("losetup -j \(image): \(listing.output)")
        }
        return String(device)
    }

    /// `count` bytes of the image from `offset`.
    private func imageBytes(at offset: Int, count: Int) throws -> [UInt8] {
        let fd = open(image, O_RDONLY)
        guard fd >= 0 else { throw HarnessError("open \(image): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var out = [UInt8](repeating: 0, count: count)
        let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
        return Array(out[0..<max(0, n)])
    }

    /// True while `rot` still holds: the same inode, its block still `EIO`.
    func stillRotted(_ rot: Rot) -> Bool {
        guard (try? Self.inode(rot.path)) == rot.inode else { return false }
        Self.dropCachedPages(rot.path)
        return Self.readBlock(rot.path, at: rot.blockOffset).errno == EIO
    }

    /// The file's bytes on the device: its data written and its cached pages clean.
    private static func flush(_ path: String) throws {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw HarnessError("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw HarnessError("fsync \(path): \(String(cString: strerror(errno)))") }
    }

    private static func inode(_ path: String) throws -> UInt64 {
        var st = stat()
        guard stat(path, &st) == 0 else { throw HarnessError("stat \(path): \(String(cString: strerror(errno)))") }
        return UInt64(st.st_ino)
    }

    /// Inverts the byte at `offset` of the image, through to the image file.
    private func flipByte(at offset: Int) throws {
        let fd = open(image, O_RDWR)
        guard fd >= 0 else { throw HarnessError("open \(image): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var byte: UInt8 = 0
        guard pread(fd, &byte, 1, off_t(offset)) == 1 else { throw HarnessError("pread \(image): \(String(cString: strerror(errno)))") }
        byte ^= 0xFF
        guard pwrite(fd, &byte, 1, off_t(offset)) == 1, fsync(fd) == 0 else {
            throw HarnessError("pwrite \(image): \(String(cString: strerror(errno)))")
        }
    }

    /// The rotted block fails with `EIO` and the first block reads as before;
    /// when cached pages hide the damage, every clean cached page of the
    /// machine is dropped once (`/proc/sys/vm/drop_caches`) and it is read again.
    private func prove(_ rot: Rot, original: [UInt8]) throws {
        Self.dropCachedPages(rot.path)
        if Self.readBlock(rot.path, at: rot.blockOffset).errno != EIO {
            try? "3\n".write(toFile: "/proc/sys/vm/drop_caches", atomically: false, encoding: .utf8)
        }
        let damaged = Self.readBlock(rot.path, at: rot.blockOffset)
        guard damaged.errno == EIO else {
            throw HarnessError("the rot did not take: block \(rot.blockOffset) of \(rot.path) read "
                               + (damaged.bytes.map { "\($0.count) bytes" } ?? String(cString: strerror(damaged.errno))) + ", not EIO")
        }
        let first = Self.readBlock(rot.path, at: 0)
        guard first.bytes == Array(original[0..<Self.blockSize]) else {
            throw HarnessError("after the rot, block 0 of \(rot.path) no longer reads: \(String(cString: strerror(first.errno)))")
        }
    }

    /// Drops the file's clean cached pages (`POSIX_FADV_DONTNEED`), so the
    /// next read comes from the device and is checked against its checksum.
    static func dropCachedPages(_ path: String) {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return }
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        close(fd)
    }

    /// One block of `path` read with `pread` at `offset`: its bytes, or the errno.
    static func readBlock(_ path: String, at offset: Int) -> (bytes: [UInt8]?, errno: Int32) {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return (nil, errno) }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: blockSize)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, blockSize, off_t(offset)) }
        guard n >= 0 else { return (nil, errno) }
        return (Array(buffer[0..<n]), 0)
    }
}
