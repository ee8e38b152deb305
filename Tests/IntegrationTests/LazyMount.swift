import Foundation

/// lazyfs (Tests/Fixtures/lazyfs/lazyfs.c): a FUSE file system that keeps
/// what was not fsynced only until it is told to lose power. Built on demand
/// into .build/lazyfs (as `make lazyfs` does) when missing or older than its
/// source; every reason FUSE cannot be used is thrown, never skipped.
enum LazyFS {
    static let source = Paths.packageRoot + "/Tests/Fixtures/lazyfs/lazyfs.c"
    static let selfTest = Paths.packageRoot + "/Tests/Fixtures/lazyfs/test_lazyfs.py"
    static let binaryPath = Paths.packageRoot + "/.build/lazyfs"

    /// The built binary, or why there is none (built once per test process).
    static func binary() throws -> String {
        switch built {
        case .success(let path): return path
        case .failure(let error): throw error
        }
    }

    private static let built: Result<String, HarnessError> = {
        let fm = FileManager.default
        if !fm.fileExists(atPath: "/dev/fuse") {
            return .failure(HarnessError("FUSE is unavailable: /dev/fuse does not exist (modprobe fuse, or run where FUSE is allowed)"))
        }
        let fd = open("/dev/fuse", O_RDWR)
        if fd < 0 {
            return .failure(HarnessError("FUSE is unavailable: /dev/fuse cannot be opened: \(String(cString: strerror(errno)))"))
        }
        close(fd)
        if !fm.isExecutableFile(atPath: "/usr/bin/fusermount3") && !fm.isExecutableFile(atPath: "/bin/fusermount3") {
            return .failure(HarnessError("FUSE is unavailable: fusermount3 is not installed (apt-get install fuse3; make test installs it)"))
        }
        func mtime(_ path: String) -> Date? { (try? fm.attributesOfItem(atPath: path))?[.modificationDate] as? Date }
        if let b = mtime(binaryPath), let s = mtime(source), b >= s { return .success(binaryPath) }
        let temp = binaryPath + ".tmp-\(getpid())"
        let command = "cc -O2 -Wall -Wextra -o '\(temp)' '\(source)' $(pkg-config --cflags --libs fuse3)"
        do {
            try fm.createDirectory(atPath: Paths.packageRoot + "/.build", withIntermediateDirectories: true)
            let (status, output) = try runProgram("/bin/sh", ["-c", command])
            guard status == 0 else {
                return .failure(HarnessError("cannot build lazyfs (needs cc and libfuse3-dev; make test installs them): \(command)\n\(output)"))
            }
            try? fm.removeItem(atPath: binaryPath)
            try fm.moveItem(atPath: temp, toPath: binaryPath)
        } catch {
            return .failure(HarnessError("cannot build lazyfs: \(error)"))
        }
        return .success(binaryPath)
    }()
}

/// One lazyfs file system: a backing directory and a mount of it, both in a
/// scratch directory of their own. `powerLoss()` drops everything not
/// fsynced and unmounts; `mount()` brings up the durable state again.
/// Always unmounted at the end (deinit), even when a test fails.
final class LazyMount {
    let scratch = Scratch()
    let backing: String
    let mountPoint: String
    let logPath: String
    private var process: Process?

    init() throws {
        backing = scratch.path + "/backing"
        mountPoint = scratch.path + "/mnt"
        logPath = scratch.path + "/lazyfs.log"
        try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        try mount()
    }

    deinit { unmount() }

    /// What lazyfs wrote to stderr so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// True while the mount point is a mount (per /proc/self/mountinfo).
    var isMounted: Bool {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        return text.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 4 && fields[4] == mountPoint
        }
    }

    /// Starts lazyfs over the backing directory and waits for the mount.
    func mount() throws {
        precondition(process == nil, "already mounted")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try LazyFS.binary())
        p.arguments = ["--exit-with-parent", backing, mountPoint]
        let out = FileHandle(forWritingAtPath: logPath)
        out?.seekToEndOfFile()
        p.standardError = out
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        process = p
        guard waitUntil(10, { !p.isRunning || isMounted }), p.isRunning else {
            process = nil
            if p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() }
            throw HarnessError("lazyfs did not mount \(mountPoint): \(log)")
        }
    }

    /// Loses power: lazyfs rebuilds the backing directory from what was
    /// durable and unmounts. Every process using the mount must be dead first.
    func powerLoss() throws {
        guard let p = process else { throw HarnessError("lazyfs is not mounted") }
        let fd = open(mountPoint + "/.lazyfs-ctl", O_WRONLY)
        guard fd >= 0 else { throw HarnessError("cannot open the lazyfs control file: \(String(cString: strerror(errno)))") }
        let command = Array("powerloss\n".utf8)
        let n = command.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let writeErrno = errno
        close(fd)
        guard waitUntil(10, { !p.isRunning }) else {
            throw HarnessError("lazyfs did not stop after the power loss: \(log)")
        }
        p.waitUntilExit()
        process = nil
        guard n == command.count else {
            throw HarnessError("the power loss failed: \(String(cString: strerror(writeErrno))): \(log)")
        }
        guard waitUntil(10, { !isMounted }) else { throw HarnessError("\(mountPoint) is still mounted after the power loss") }
    }

    /// A clean unmount (fusermount3 -u; lazily if busy), and lazyfs stopped.
    func unmount() {
        if isMounted {
            for args in [["-u", mountPoint], ["-u", "-z", mountPoint]] where isMounted {
                _ = try? runProgram("/usr/bin/env", ["fusermount3"] + args)
                _ = waitUntil(5) { !isMounted }
            }
        }
        if let p = process {
            if !waitUntil(10, { !p.isRunning }) { kill(p.processIdentifier, SIGKILL) }
            p.waitUntilExit()
            process = nil
        }
    }
}
