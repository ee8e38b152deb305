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
        let original = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        guard original.count >= 4 * Self.blockSize else { throw HarnessError("\(path) is too small to rot (\(original.count) bytes)") }
        // 64 bytes inside one block in the middle of the file; the byte flipped is the 33rd.
        let runStart = (original.count / 2) / Self.blockSize * Self.blockSize + 1024
        let run = Array(original[runStart..<(runStart + 64)])
        try Self.flush(path)
        let places = try findOnDevice(run, phase: runStart % Self.blockSize)
        // Old copies of the same bytes (a dropped temp file's freed extent) may
        // be found too: each is changed, the file's own among them.
        guard !places.isEmpty, places.count <= 4 else {
            throw HarnessError("the 64 bytes at \(runStart) of \(path) are \(places.count) times in \(image), not 1 to 4")
        }
        for place in places { try flipByte(at: place + 32) }
        let damaged = Rot(path: path, inode: try Self.inode(path), blockOffset: (runStart + 32) / Self.blockSize * Self.blockSize)
        try prove(damaged, original: original)
        return damaged
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

    /// The image offsets where `run` begins `phase` bytes into a block (data
    /// extents are block-aligned on the device), read region by region
    /// (`SEEK_DATA`, `SEEK_HOLE`: the sparse image's holes are skipped).
    private func findOnDevice(_ run: [UInt8], phase: Int) throws -> [Int] {
        let fd = open(image, O_RDONLY)
        guard fd >= 0 else { throw HarnessError("open \(image): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let seekData: Int32 = 3, seekHole: Int32 = 4   // <unistd.h> with _GNU_SOURCE; Glibc does not export them
        let chunkSize = 4 << 20
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        var found: [Int] = []
        var offset: off_t = 0
        while offset < Self.imageBytes {
            let start = lseek(fd, offset, seekData)
            if start < 0 { break }   // ENXIO: no data after offset
            let end = lseek(fd, start, seekHole)
            var at = Int(start) / Self.blockSize * Self.blockSize
            while at < Int(end) {
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, chunkSize, off_t(at)) }
                guard n > 0 else { break }
                found += Self.matches(run, in: buffer, count: n, phase: phase).map { at + $0 }
                at += n
            }
            offset = end
        }
        return found
    }

    /// Offsets (within `buffer`) of the blocks whose bytes at `phase` are `run`.
    private static func matches(_ run: [UInt8], in buffer: [UInt8], count: Int, phase: Int) -> [Int] {
        var out: [Int] = []
        buffer.withUnsafeBytes { raw in
            run.withUnsafeBytes { needle in
                var block = 0
                while block + phase + needle.count <= count {
                    if memcmp(raw.baseAddress! + block + phase, needle.baseAddress!, needle.count) == 0 { out.append(block + phase) }
                    block += blockSize
                }
            }
        }
        return out
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
            try? "1\n".write(toFile: "/proc/sys/vm/drop_caches", atomically: false, encoding: .utf8)
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
