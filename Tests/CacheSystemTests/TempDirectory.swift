#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory made by mkdtemp under /tmp (short, so socket paths fit
/// in sun_path), removed with everything in it when the value goes away.
/// Cleanup uses plain libc calls, not the code under test.
final class TempDirectory {
    let path: String

    init() {
        var template = Array("/tmp/cs-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let p = mkdtemp(buffer.baseAddress!) else { return nil }
            return String(cString: p)
        }
        guard let made else { fatalError("mkdtemp failed: errno \(errno)") }
        path = made
    }

    deinit { TempDirectory.remove(path) }

    /// `path` joined with a relative name.
    func at(_ name: String) -> String { path + "/" + name }

    /// Writes `bytes` to `name` (created or replaced) with plain libc calls.
    @discardableResult
    func write(_ name: String, _ bytes: [UInt8], mode: mode_t = 0o644) -> String {
        let p = at(name)
        let fd = Glibc.open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        precondition(fd >= 0, "open(\(p)) failed: errno \(errno)")
        defer { Glibc.close(fd) }
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, bytes.count - done) }
            precondition(n > 0, "write(\(p)) failed: errno \(errno)")
            done += n
        }
        return p
    }

    @discardableResult
    func write(_ name: String, _ text: String) -> String { write(name, Array(text.utf8)) }

    /// Makes directory `name` with `mode` (exactly, whatever the umask).
    @discardableResult
    func makeDirectory(_ name: String, mode: mode_t = 0o700) -> String {
        let p = at(name)
        precondition(mkdir(p, mode) == 0, "mkdir(\(p)) failed: errno \(errno)")
        precondition(chmod(p, mode) == 0, "chmod(\(p)) failed: errno \(errno)")
        return p
    }

    /// Makes `name` a symbolic link to `target`.
    @discardableResult
    func link(_ name: String, to target: String) -> String {
        let p = at(name)
        precondition(symlink(target, p) == 0, "symlink(\(p)) failed: errno \(errno)")
        return p
    }

    /// Whether `name` exists (the link itself for a link).
    func exists(_ name: String) -> Bool {
        var st = stat()
        return lstat(at(name), &st) == 0
    }

    /// The names directly in directory `name` ("" for the top).
    func names(in name: String = "") -> [String] {
        TempDirectory.entries(name.isEmpty ? path : at(name)).sorted()
    }

    /// The bytes of `name`, read with plain libc calls.
    func contents(_ name: String) -> [UInt8] {
        let fd = Glibc.open(at(name), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { Glibc.close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            out += chunk[0..<n]
        }
        return out
    }

    private static func entries(_ dir: String) -> [String] {
        guard let d = opendir(dir) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let entry = readdir(d) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Removes `p` and, for a real directory (never a link), what it holds.
    private static func remove(_ p: String) {
        var st = stat()
        guard lstat(p, &st) == 0 else { return }
        if st.st_mode & S_IFMT == S_IFDIR {
            // A test may have left it unwritable or unreadable.
            _ = chmod(p, 0o700)
            for name in entries(p) { remove(p + "/" + name) }
            _ = rmdir(p)
        } else {
            _ = unlink(p)
        }
    }
}

/// Bytes that differ from position to position, so a shifted or partial
/// copy never compares equal.
func pattern(_ count: Int, seed: UInt8 = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 / 251 &+ Int(seed)) }
}

/// Mode bits of `path` (lstat), permission and special bits only.
func permissions(_ path: String) -> mode_t {
    var st = stat()
    guard lstat(path, &st) == 0 else { return 0 }
    return st.st_mode & 0o7777
}
