import CacheSystem

/// Whether a store directory may be used: another user who owns or can
/// write to it, or to a directory above it, could plant symbolic links or
/// swap its files for a daemon that may run as root.
enum StoreTrust {
    /// Nil when the store directory is a real directory owned by this user
    /// that no one else can write, and every directory above it is owned by
    /// root or this user and writable by no one else (a root-owned sticky
    /// directory such as /tmp excepted); else what is wrong and how to fix it.
    static func problem(_ directory: String) -> String? {
        if let p = TrustedDirectory.problem(directory, allowRoot: false) { return p }
        return TrustedDirectory.ancestorsProblem(of: directory).map { "a directory above the store: \($0)" }
    }
}
