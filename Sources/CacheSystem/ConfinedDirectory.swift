#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// A directory opened once, inside which every path is resolved beneath it
/// without following a symbolic link at any step, the last included.
///
/// Paths may be given relative to the directory or as absolute paths under
/// `path` (the store's own spelling of them); any other path, and any `..`,
/// is refused. Resolution uses `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
/// where the kernel has it (Linux 5.6), else a walk of `openat(O_NOFOLLOW)`
/// one component at a time. Renames, unlinks and directory creation act on
/// the last component relative to its parent's descriptor, so they act on a
/// link itself, never on what it points to. A planted link makes the call
/// fail with `ELOOP` (or `ENOTDIR`) instead of reaching outside.
public final class ConfinedDirectory: Sendable {
    /// The directory's path, as opened.
    public let path: String
    /// The open directory (kept for `flock` and `*at` calls).
    public let descriptor: FileDescriptor

    /// Opens `path`, which must be a directory and not a symbolic link.
    public init(opening path: String) throws(SystemError) {
        self.path = path
        descriptor = try FileDescriptor.open(path, [.readOnly, .directory, .noFollow])
    }

    public func close() { descriptor.close() }

    /// `p` relative to this directory; throws EXDEV for a path outside it.
    func relative(_ p: String) throws(SystemError) -> String {
        // The store's own paths (`<path>/objects/ab/cd...`) need no splitting:
        // under `path`, no empty, `.` or `..` component, no trailing slash.
        if let rel = Self.plainSuffix(p, under: path) { return rel }
        var rel = p
        if p == path { rel = "." }
        else if p.hasPrefix(path + "/") { rel = String(p.dropFirst(path.count + 1)) }
        else if p.hasPrefix("/") { throw SystemError("resolve", p, errno: EXDEV) }
        let parts = rel.split(separator: "/")
        if parts.contains("..") { throw SystemError("resolve", p, errno: EXDEV) }
        return parts.isEmpty ? "." : parts.joined(separator: "/")
    }

    /// `p` after `base` and a slash, when every component of it is a plain
    /// name (not empty, `.` or `..`); nil otherwise (the general path decides).
    /// A relative `p` of plain names is itself.
    static func plainSuffix(_ p: String, under base: String) -> String? {
        var result: String?
        p.utf8.withContiguousStorageIfAvailable { pb in
            base.utf8.withContiguousStorageIfAvailable { bb in
                let relative = pb.first != UInt8(ascii: "/")
                let n = relative ? -1 : bb.count
                if !relative {
                    guard pb.count > n + 1, pb[n] == UInt8(ascii: "/"), memcmp(pb.baseAddress!, bb.baseAddress!, n) == 0 else { return }
                } else if pb.isEmpty { return }
                var componentStart = n + 1
                for i in (n + 1)...pb.count {
                    guard i == pb.count || pb[i] == UInt8(ascii: "/") else { continue }
                    let length = i - componentStart
                    if length == 0 { return }
                    if pb[componentStart] == UInt8(ascii: "."), length == 1 || (length == 2 && pb[componentStart + 1] == UInt8(ascii: ".")) { return }
                    componentStart = i + 1
                }
                result = relative ? p : String(decoding: UnsafeBufferPointer(rebasing: pb[(n + 1)...]), as: UTF8.self)
            }
        }
        return result
    }

    /// Opens `p` beneath this directory with `flags` (`O_CLOEXEC` added).
    public func open(_ p: String, _ flags: OpenFlags, mode: mode_t = 0o600) throws(SystemError) -> FileDescriptor {
        let rel = try relative(p)
        if let fd = try retryingOnInterrupt("open", p, nilOn: ENOSYS, or: EPERM, {
            clinux_openat2_beneath(descriptor.rawValue, rel, flags.rawValue | O_CLOEXEC, UInt32(mode))
        }) {
            return FileDescriptor(rawValue: fd, path: p)
        }
        // No openat2 here (an old kernel, or a seccomp filter that denies it).
        return try walk(rel, flags, mode: mode, display: p)
    }

    /// openat(O_NOFOLLOW) one component at a time.
    private func walk(_ rel: String, _ flags: OpenFlags, mode: mode_t, display: String) throws(SystemError) -> FileDescriptor {
        let parts = rel.split(separator: "/").map(String.init)
        var current = descriptor.rawValue
        var owned = false
        defer { if owned { _ = Glibc.close(current) } }
        for (i, part) in parts.enumerated() {
            let last = i == parts.count - 1
            let f = (last ? flags.union(.noFollow) : [.pathOnly, .directory, .noFollow]).rawValue | O_CLOEXEC
            let next = try retryingOnInterrupt("open", display) { Glibc.openat(current, part, f, mode) }
            if owned { _ = Glibc.close(current) }
            if last { owned = false; return FileDescriptor(rawValue: next, path: display) }
            current = next
            owned = true
        }
        // `rel` was "." : the directory itself.
        let fd = try retryingOnInterrupt("open", display) { Glibc.openat(descriptor.rawValue, ".", flags.rawValue | O_CLOEXEC, mode) }
        return FileDescriptor(rawValue: fd, path: display)
    }

    /// The parent directory of `p`, opened beneath this one, and `p`'s last component.
    private func parent(of p: String) throws(SystemError) -> (FileDescriptor?, String) {
        let rel = try relative(p)
        guard rel != "." else { throw SystemError("resolve", p, errno: EINVAL) }
        guard let slash = rel.lastIndex(of: "/") else { return (nil, rel) }
        let dir = try open(String(rel[..<slash]), [.pathOnly, .directory])
        return (dir, String(rel[rel.index(after: slash)...]))
    }

    /// Runs `body` with the raw descriptor of `p`'s parent and `p`'s last component.
    private func inParent<T>(_ p: String, _ body: (Int32, String) throws(SystemError) -> T) throws(SystemError) -> T {
        let (dir, name) = try parent(of: p)
        defer { dir?.close() }
        return try body(dir?.rawValue ?? descriptor.rawValue, name)
    }

    /// Creates directory `p` with `mode` if it does not exist; true when it
    /// was created (its parent then needs an fsync for the entry to be
    /// durable). An existing entry that is not a real directory (a symbolic
    /// link, say) is an error.
    @discardableResult
    public func makeDirectory(_ p: String, mode: mode_t = 0o700) throws(SystemError) -> Bool {
        try inParent(p) { (dir, name) throws(SystemError) -> Bool in
            if mkdirat(dir, name, mode) == 0 { return true }
            guard errno == EEXIST else { throw SystemError("mkdir", p) }
            var st = stat()
            guard fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { throw SystemError("lstat", p) }
            if st.st_mode & S_IFMT != S_IFDIR { throw SystemError("mkdir", p + " (not a directory)", errno: st.st_mode & S_IFMT == S_IFLNK ? ELOOP : ENOTDIR) }
            return false
        }
    }

    /// Renames `from` to `to`, both beneath this directory.
    public func rename(_ from: String, _ to: String) throws(SystemError) {
        let (fromDir, fromName) = try parent(of: from)
        defer { fromDir?.close() }
        let (toDir, toName) = try parent(of: to)
        defer { toDir?.close() }
        if renameat(fromDir?.rawValue ?? descriptor.rawValue, fromName, toDir?.rawValue ?? descriptor.rawValue, toName) != 0 {
            throw SystemError("rename", "\(from) -> \(to)")
        }
    }

    /// Gives the file `existing` a second name `new` (a hard link; `existing`
    /// itself is not followed if it is a link), both beneath this directory.
    public func link(_ existing: String, _ new: String) throws(SystemError) {
        let (fromDir, fromName) = try parent(of: existing)
        defer { fromDir?.close() }
        let (toDir, toName) = try parent(of: new)
        defer { toDir?.close() }
        if linkat(fromDir?.rawValue ?? descriptor.rawValue, fromName, toDir?.rawValue ?? descriptor.rawValue, toName, 0) != 0 {
            throw SystemError("link", "\(existing) -> \(new)")
        }
    }

    /// Removes the file (or link) `p`; a missing one is not an error.
    public func unlink(_ p: String) throws(SystemError) {
        try inParent(p) { (dir, name) throws(SystemError) in
            if unlinkat(dir, name, 0) != 0 && errno != ENOENT { throw SystemError("unlink", p) }
        }
    }

    /// `lstat` of `p` (the link itself for a link); nil when it does not exist.
    public func status(_ p: String) throws(SystemError) -> FileStatus? {
        try linkStatus(p).map(FileStatus.init)
    }

    /// The identity of `p` itself (`lstat`: a link's own); nil when it does not exist.
    public func identity(_ p: String) throws(SystemError) -> FileIdentity? {
        try linkStatus(p).map(FileIdentity.init)
    }

    /// `fstatat(AT_SYMLINK_NOFOLLOW)` of `p` in its parent; nil when it does not exist.
    private func linkStatus(_ p: String) throws(SystemError) -> stat? {
        do {
            return try inParent(p) { (dir, name) throws(SystemError) -> stat? in
                var st = stat()
                if fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                    if errno == ENOENT || errno == ENOTDIR { return nil }
                    throw SystemError("lstat", p)
                }
                return st
            }
        } catch where error.errno == ENOENT || error.errno == ENOTDIR {
            return nil
        }
    }

    /// Flushes the entries of directory `p` (after a rename or unlink in it).
    public func syncDirectory(_ p: String) throws(SystemError) {
        let fd = try open(p, [.readOnly, .directory])
        defer { fd.close() }
        try fd.sync()
    }

    /// One name in a listing and what it is.
    public struct Entry: Sendable, Equatable {
        public var name: String
        public var kind: FileKind
        public init(name: String, kind: FileKind) {
            self.name = name
            self.kind = kind
        }
    }

    /// The entries of directory `p`, without `.` and `..`: at most `limit` of
    /// them (in the directory's order), so a huge directory costs no more.
    /// Each one's kind comes from the listing itself (`d_type`), with no call
    /// per entry; a file system that does not say (`DT_UNKNOWN`) costs one
    /// `fstatat` on the open directory for that entry.
    public func list(_ p: String, limit: Int = Int.max) throws(SystemError) -> [Entry] {
        let fd = try open(p, [.readOnly, .directory])
        guard let dir = fdopendir(fd.rawValue) else {
            let e = SystemError("opendir", p)
            fd.close()
            throw e
        }
        defer { closedir(dir) }
        var entries: [Entry] = []
        while entries.count < limit, let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { ptr in
                ptr.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            guard name != "." && name != ".." else { continue }
            guard let kind = try Self.kind(dType: entry.pointee.d_type, of: name, in: dirfd(dir), display: p) else { continue }
            entries.append(Entry(name: name, kind: kind))
        }
        return entries
    }

    /// The kind `d_type` says; for `DT_UNKNOWN`, what `fstatat` (not
    /// following a link) says of `name` in `directory`, nil when it is gone.
    static func kind(dType: UInt8, of name: String, in directory: Int32, display: String) throws(SystemError) -> FileKind? {
        switch Int32(dType) {
        case Int32(DT_REG): return .regular
        case Int32(DT_DIR): return .directory
        case Int32(DT_LNK): return .symbolicLink
        case Int32(DT_UNKNOWN):
            var st = stat()
            if fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                if errno == ENOENT { return nil }
                throw SystemError("lstat", display + "/" + name)
            }
            return FileKind(mode: st.st_mode)
        default: return .special
        }
    }

    /// Reads a whole file, at most `limit` bytes.
    public func read(_ p: String, limit: Int = Int.max) throws(SystemError) -> [UInt8] {
        let fd = try open(p, .readOnly)
        defer { fd.close() }
        return try fd.readToEnd(limit: limit)
    }

    /// Writes `bytes` to `p` beneath this directory so that a crash leaves
    /// the old file or the new one, never a mix: a temp file in
    /// `tempDirectory` (beneath it too, on the same file system), fsync,
    /// rename over `p` (a link there is replaced, never followed), fsync of
    /// `p`'s directory unless `syncDirectory` is false (the caller syncs it
    /// once for many files). The one durable write: every file the store
    /// writes goes through it.
    ///
    /// With a `stop` flag (a long write: the log's rewrite), the bytes go
    /// out `stoppablePiece` at a time, each synced before the next (so no
    /// one sync is long), and the flag is looked at before each piece and
    /// before the rename: once it is raised, the temp file is removed, `p`
    /// is left as it was and `ECANCELED` is thrown.
    public func writeDurably(_ bytes: [UInt8], to p: String, tempDirectory: String,
                             mode: mode_t = 0o644, syncDirectory shouldSync: Bool = true, stop: StopFlag? = nil) throws(SystemError) {
        try writeDurably(to: p, tempDirectory: tempDirectory, mode: mode, syncDirectory: shouldSync, stop: stop) { (fd, temp) throws(SystemError) in
            if let stop {
                try Self.writeInPieces(bytes, fd, stop: stop, display: temp)
            } else {
                try fd.writeAll(bytes)
            }
        }
    }

    /// `writeDurably(_:to:...)` of the bytes `write` writes to the temp
    /// file (given with its path, for errors), for a file too large to be
    /// built in memory first (the log's rewrite, written as it is encoded).
    /// With `stop`, `write` looks at the flag as it goes (throwing
    /// `ECANCELED`), and it is looked at again before the rename.
    public func writeDurably(to p: String, tempDirectory: String, mode: mode_t = 0o644, syncDirectory shouldSync: Bool = true,
                             stop: StopFlag? = nil, _ write: (FileDescriptor, String) throws(SystemError) -> Void) throws(SystemError) {
        let temp = "\(tempDirectory)/\(TempName.next())"
        let fd = try open(temp, [.writeOnly, .create, .exclusive], mode: mode)
        var open = true
        do throws(SystemError) {
            try write(fd, temp)
            try fd.sync()
            if stop?.isRaised == true { throw SystemError("write", temp, errno: ECANCELED) }
            fd.close()
            open = false
            try rename(temp, p)
        } catch {
            // Never closed twice: after the first close the number may
            // already be another thread's file or socket.
            if open { fd.close() }
            // The write's own error is the one passed on; a temp file that
            // cannot be removed either stays in `tempDirectory`, which the
            // store empties at start.
            try? unlink(temp)
            throw error
        }
        if shouldSync { try syncDirectory(FileSystem.directoryName(of: p)) }
    }

    /// A stoppable write's piece: 16 MiB take well under a second to
    /// write and sync on any disk the store is meant for.
    public static let stoppablePiece = 16 << 20

    /// Writes `bytes` to `fd` a piece at a time, each synced, looking at
    /// `stop` before each; throws `ECANCELED` once it is raised.
    private static func writeInPieces(_ bytes: [UInt8], _ fd: FileDescriptor, stop: StopFlag, display: String) throws(SystemError) {
        try bytes.withBytes { (raw) throws(SystemError) in
            var done = 0
            while done < raw.count {
                if stop.isRaised { throw SystemError("write", display, errno: ECANCELED) }
                let end = min(raw.count, done + stoppablePiece)
                try fd.writeAll(UnsafeRawBufferPointer(rebasing: raw[done..<end]))
                if end < raw.count { try fd.syncData() }
                done = end
            }
        }
    }
}
