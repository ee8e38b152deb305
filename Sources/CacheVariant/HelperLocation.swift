#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

extension VariantHelpers {
    /// The program's name.
    public static let programName = "cached-variant"

    /// Where `cached-variant` is looked for, first found first: beside the
    /// running daemon (a build directory, `/usr/local/bin`), then in
    /// `lib/cached/` and `libexec/cached/` beside the daemon's `bin/`
    /// (docs/operations.md, "Image variants").
    public static func candidates(daemon: String) -> [String] {
        let dir = FileSystem.directoryName(of: daemon)
        let prefix = FileSystem.directoryName(of: dir)
        return ["\(dir)/\(programName)", "\(prefix)/lib/cached/\(programName)", "\(prefix)/libexec/cached/\(programName)"]
    }

    /// The candidates for the daemon running as `/proc/self/exe`.
    public static func candidates() -> [String] {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return [] }
        return candidates(daemon: String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// The first candidate that is an executable file; nil when there is none.
    public static func locate() -> String? {
        candidates().first { access($0, X_OK) == 0 }
    }
}
