#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CacheSystem
import CachedClientCore

/// `get objects HASH...`: many objects opened with `open` of `hashes`, 64
/// to a request (docs/protocol.md, "open of many objects"). Without `-o`,
/// each object's hash and size, as the daemon verified it; with `-o DIR`,
/// each object's bytes into `DIR/HASH` (atomically, as `get image -o`);
/// with `-o -`, their bytes one after another on stdout. An object that
/// could not be opened is named on stderr with its reason, and the status
/// says so (4 when every failure was `not_found`, else 1): never a success
/// with less than was asked.
extension Commands {
    func getObjects(_ hashes: [String]) throws {
        guard !hashes.isEmpty else { throw CLIError(code: .usage, message: "get objects needs at least one HASH") }
        if let bad = hashes.first(where: { Hash128(hex: $0) == nil }) {
            throw CLIError(code: .usage, message: "not an object's hash: \"\(Format.visible(bad))\" (32 lowercase hex digits)")
        }
        if let output = invocation.output, output != "-" { try Self.checkDirectory(output) }
        let objects = try connect(mayTakeLong: true).open(hashes: hashes)
        defer { for o in objects { o.close() } }
        var failures: [(hash: String, code: String, message: String)] = []
        for (hash, object) in zip(hashes, objects) {
            switch object {
            case let .failed(code, message):
                failures.append((hash, code, message))
                if json && invocation.output != "-" { printJSON(.object([("hash", .string(hash)), ("error", .object([("code", .string(code)), ("message", .string(message))]))])) }
            case let .file(fd, size):
                if json && invocation.output != "-" { printJSON(.object([("hash", .string(hash)), ("size", .number(String(size)))])) }
                switch invocation.output {
                case nil: if !json { print("\(hash)  \(size)") }
                case "-"?: try Self.copy(fd, size: size, to: FileDescriptor(rawValue: 1, path: "stdout"), naming: "stdout")
                case let dir?:
                    let path = dir + "/" + hash
                    try write(to: path, .object([]), size: size) { out in try Self.copy(fd, size: size, to: out, naming: path) }
                }
            }
        }
        guard !failures.isEmpty else { return }
        fflush(nil)  // what was printed comes before the errors
        for f in failures { Output.error("cachectl: \(f.hash): \(Format.visible(f.message)) (\(f.code))\n") }
        let allNotFound = failures.allSatisfy { $0.code == ErrorCode.notFound.rawValue }
        throw CLIError(code: allNotFound ? .notFound : .failure,
                       message: "\(failures.count) of \(hashes.count) objects could not be opened (named above)")
    }

    /// Fails early when `path` is not a directory this user can write.
    static func checkDirectory(_ path: String) throws {
        var st = stat()
        guard stat(path, &st) == 0 else { throw CLIError(code: .failure, message: "cannot write into \(Format.visible(path)): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw CLIError(code: .usage, message: "get objects -o takes a directory (or - for stdout), and \(Format.visible(path)) is not one")
        }
        guard access(path, W_OK) == 0 else { throw CLIError(code: .failure, message: "cannot write into \(Format.visible(path)): \(String(cString: strerror(errno)))") }
    }
}
