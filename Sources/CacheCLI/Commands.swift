#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CacheSystem
import CachedClientCore

/// Runs one cachectl command against the daemon, through the one Swift client's
/// connection code (`BlockingClient`), and prints the result.
struct Commands {
    let invocation: Invocation

    var json: Bool { invocation.json }

    func run() throws {
        let words = invocation.command
        switch (words.first, words.count) {
        case ("get", _):
            try get(Array(words.dropFirst()))
        case ("prefetch", 1), ("prefetch", 2):
            let what = words.count == 2 ? words[1] : "all"
            guard PrefetchTarget(rawValue: what) != nil else {
                throw CLIError(code: .usage, message: "prefetch takes all, posts or images, not \"\(what)\"")
            }
            try prefetch(what)
        case ("delete", 3) where words[1] == "post":
            let answer = try call(connect(mayTakeLong: true), "delete_post", [("id", try Self.postID(words[2], string: invocation.stringID))])
            if json { printJSON(answer) } else { print("deleted post \(Format.text(answer["id"]))") }
        case ("status", 1): try simple("status", Format.status)
        case ("verify", 1): try simple("verify", mayTakeLong: true, Format.verify)
        case ("gc", 1): try simple("gc", mayTakeLong: true, Format.gc)
        case ("compact", 1): try simple("compact", mayTakeLong: true, Format.compact)
        case ("ping", 1): try simple("ping") { Format.ping($0, socket: invocation.socket) }
        case ("metrics", 1):
            let answer = try call(connect(), "status")
            print(Format.metrics(answer), terminator: "")
        default:
            throw CLIError(code: .usage, message: "unknown command \"\(words.joined(separator: " "))\" (see cachectl --help)")
        }
    }

    /// Connects, once the socket's directory is found trustworthy.
    ///
    /// The timeout (`--timeout`, `CACHED_TIMEOUT`, default 10 s; 0 for none)
    /// limits connecting and sending for every command. An answer the
    /// daemon gives at once (`ping`, `status`, `metrics`, `get post`,
    /// `get posts`) must come within it. A command that may rightly take
    /// minutes (`get image` can download, `get images` can fetch the
    /// manifest, `prefetch`, `verify`, `gc`, `compact`) is never cut while
    /// the daemon is alive: after each timeout of silence cachectl pings the
    /// daemon on a second connection and gives up only if that goes unanswered.
    func connect(mayTakeLong: Bool = false) -> BlockingClient {
        let timeout = ClientTimeout.seconds(invocation.timeout, mayTakeLong: mayTakeLong)
        // A socket the user did not name with --socket is refused in a directory another user owns.
        return BlockingClient(socketPath: invocation.socket, timeout: timeout, quick: !mayTakeLong, requiringOwner: !invocation.socketNamed)
    }

    /// Sends one request; an error answer becomes a CLIError with the matching exit status.
    private func call(_ client: BlockingClient, _ op: String, _ fields: [(String, JSON)] = []) throws -> JSON {
        let answer = try client.answer(op, fields)
        try check(answer)
        return answer
    }

    /// Throws an error answer's `CachedError` as a CLIError with the exit
    /// status of its code (printed first under `--json`); `stoppedAfter`
    /// says how far a listing read page by page got before it.
    func check(_ answer: JSON, stoppedAfter progress: String? = nil) throws {
        guard let error = CachedError(answer: answer) else { return }
        if json { printJSON(answer) }
        let exit: ExitCode = switch error.code {
        case .daemon(.notFound), .daemon(.notCached): .notFound
        case .daemon(.upstream): .upstream
        case .daemon(.badRequest): .usage
        default: .failure
        }
        let stopped = progress.map { "the listing stopped \($0): " } ?? ""
        throw CLIError(code: exit, message: "\(stopped)\(Format.visible(error.message)) (\(error.code.name))")
    }

    private func simple(_ op: String, mayTakeLong: Bool = false, _ format: (JSON) -> String) throws {
        let answer = try call(connect(mayTakeLong: mayTakeLong), op)
        if json { printJSON(answer) } else { print(format(answer)) }
    }

    /// A post id from the command line: an integer when it is spelled as
    /// one, else a string (docs/protocol.md, "Post ids"); always the string
    /// with `string` (`--string`).
    static func postID(_ text: String, string: Bool = false) throws -> JSON {
        guard !text.isEmpty, text.utf8.count <= PostID.maxStringBytes else {
            throw CLIError(code: .usage, message: "a post id is an integer or a string of 1 to \(PostID.maxStringBytes) bytes")
        }
        if string { return .string(text) }
        return Int64(text).map { String($0) == text ? JSON.number(text) : .string(text) } ?? .string(text)
    }

    /// What `get` takes, for its usage errors.
    static let getSubjects = "post ID | posts [--query TEXT] [--offset N] [--limit N] | image ROW [--width W] [--height H] [--fit F] [--format F] [-o FILE] "
        + "| images [--offset N] [--limit N] | objects HASH... [-o DIR]"

    private func get(_ args: [String]) throws {
        guard let subject = args.first else {
            throw CLIError(code: .usage, message: "get needs what to get: \(Self.getSubjects) (see cachectl --help)")
        }
        switch (subject, args.count) {
        case ("post", 2):
            // An integer id and a string id of the same spelling find each
            // other (docs/protocol.md, "Post ids"): the shell's text is enough.
            let answer = try call(connect(), "get_post", [("id", try Self.postID(args[1], string: invocation.stringID))])
            if json { printJSON(answer) } else { print(Format.post(answer["post"] ?? .null, id: answer["id"])) }
        case ("posts", 1):
            try list(.posts)
        case ("image", 2):
            guard let row = Int(args[1]), row >= 0 else { throw CLIError(code: .usage, message: "row must be a non-negative integer, not \"\(args[1])\"") }
            // A file that cannot be written fails before anything is downloaded.
            if let output = invocation.output, output != "-" { try Self.checkWritable(output) }
            let client = connect(mayTakeLong: true)
            var fields: [(String, JSON)] = [("row", .number(String(row)))]
            if !invocation.variant.isEmpty { fields.append(("variant", .object(invocation.variant))) }
            let answer = try call(client, "get_image", fields)
            let image = answer["image"] ?? .null
            if let output = invocation.output {
                // A variant's bytes are its own object's.
                try save(invocation.variant.isEmpty ? image : image["variant"] ?? .null, client: client, to: output)
                if json && output != "-" { printJSON(answer) }
            } else if json {
                printJSON(answer)
            } else {
                print(Format.image(image))
            }
        case ("images", 1):
            try list(.images)
        case ("objects", _):
            try getObjects(Array(args.dropFirst()))
        default:
            throw CLIError(code: .usage, message: "get expects \(Self.getSubjects), not \"\(Format.visible(args.joined(separator: " ")))\"")
        }
    }

    /// The error for an output file that cannot be written: the path as the
    /// user gave it and the system's reason, nothing about temp files.
    private static func cannotWrite(_ path: String, errno code: Int32) -> CLIError {
        CLIError(code: .failure, message: "cannot write \(Format.visible(path)): \(String(cString: strerror(code)))")
    }

    /// Fails early, with `cannotWrite`, when `path` is a directory or its
    /// directory does not exist, is not one, or cannot be written to.
    static func checkWritable(_ path: String) throws {
        var st = stat()
        if stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR { throw cannotWrite(path, errno: EISDIR) }
        let dir = FileSystem.directoryName(of: path)
        guard stat(dir, &st) == 0 else { throw cannotWrite(path, errno: errno) }
        guard st.st_mode & S_IFMT == S_IFDIR else { throw cannotWrite(path, errno: ENOTDIR) }
        guard access(dir, W_OK) == 0 else { throw cannotWrite(path, errno: errno) }
    }

    /// Writes the verified bytes of an image into `path` (atomically) or
    /// stdout: the daemon passes a descriptor of the verified file (`open`),
    /// copied with `copy_file_range`. A daemon without `open` (older than
    /// it) answers `bad_request`; then the bytes come over the socket (`read`).
    private func save(_ image: JSON, client: BlockingClient, to path: String) throws {
        guard let hash = image["hash"]?.string else { throw CLIError(code: .failure, message: "the daemon gave no hash for this row") }
        switch try client.open(hash: hash) {
        case let .file(file, size, _):
            defer { file.close() }
            try write(to: path, image, size: size) { out in try Self.copy(file, size: size, to: out, naming: path) }
        case let .error(answer):
            if CachedError(answer: answer)?.code == .daemon(.badRequest) { return try saveRead(hash, image, client: client, to: path) }
            try check(answer)
        }
    }

    /// `save` through `read`: the bytes after the answer line.
    private func saveRead(_ hash: String, _ image: JSON, client: BlockingClient, to path: String) throws {
        let (header, bytes) = try client.read(hash: hash)
        try check(header)
        try write(to: path, image, size: Int64(bytes.count)) { out in
            do throws(SystemError) { try bytes.withBytes { (raw) throws(SystemError) in try out.writeAll(raw) } }
            catch { throw Self.cannotWrite(path, errno: error.errno) }
        }
    }

    /// Runs `fill` on stdout for `-`, else on a hidden temp file beside
    /// `path`, fsynced and renamed over it when complete: a reader never sees
    /// half an image. The temp file is removed on every failure, and its name
    /// never appears in a message.
    func write(to path: String, _ image: JSON, size: Int64, _ fill: (FileDescriptor) throws -> Void) throws {
        if path == "-" { return try fill(FileDescriptor(rawValue: 1, path: "stdout")) }
        let dir = FileSystem.directoryName(of: path)
        let temp = "\(dir)/.\(TempName.next(".cachectl"))"
        let fd: FileDescriptor
        do throws(SystemError) { fd = try FileDescriptor.open(temp, [.writeOnly, .create, .exclusive], mode: 0o644) }
        catch { throw Self.cannotWrite(path, errno: error.errno) }
        var open = true
        do {
            try fill(fd)
            do throws(SystemError) {
                try fd.sync()
                fd.close()
                open = false
                try FileSystem.rename(temp, path)
            } catch { throw Self.cannotWrite(path, errno: error.errno) }
        } catch {
            if open { fd.close() }
            do throws(SystemError) { try FileSystem.unlink(temp) } catch {
                Output.error("cachectl: could not remove \(Format.visible(temp)): \(String(cString: strerror(error.errno)))\n")
            }
            throw error
        }
        if isatty(2) != 0 && !json, let type = image["type"]?.string {
            Output.error("wrote \(size) bytes (\(type)) to \(path)\n")
        }
    }

    /// The kernel's copy for each call to `copy_file_range` (it may do less).
    static let copyChunk = 1 << 30

    /// Copies `size` bytes of `file` from offset 0 into `out` with
    /// `copy_file_range`, or through a 128 KiB buffer where the kernel cannot
    /// copy between the two (stdout a pipe or a terminal, another file
    /// system on an old kernel).
    static func copy(_ file: FileDescriptor, size: Int64, to out: FileDescriptor, naming path: String) throws(CLIError) {
        var offset: Int64 = 0
        var kernel = true
        var buffer: [UInt8] = []
        while offset < size {
            let n: Int
            if kernel {
                do throws(SystemError) {
                    n = try file.copyRange(to: out, from: &offset, count: Int(min(size - offset, Int64(copyChunk))))
                } catch {
                    guard [EXDEV, ENOSYS, EINVAL, EOPNOTSUPP, EBADF].contains(error.errno) else { throw cannotWrite(path, errno: error.errno) }
                    kernel = false
                    continue
                }
            } else {
                if buffer.isEmpty { buffer = [UInt8](repeating: 0, count: 128 << 10) }
                do throws(SystemError) {
                    let want = Int(min(size - offset, Int64(buffer.count)))
                    let from = offset
                    n = try buffer.withMutableBytes { (raw) throws(SystemError) in try file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<want]), at: from) }
                    try buffer.withBytes { (raw) throws(SystemError) in try out.writeAll(UnsafeRawBufferPointer(rebasing: raw[0..<n])) }
                    offset += Int64(n)
                } catch { throw cannotWrite(path, errno: error.errno) }
            }
            if n == 0 {
                throw CLIError(code: .failure, message: "the object's file ended after \(offset) of its \(size) bytes (changed on disk since it was verified; try again)")
            }
        }
    }

    private func prefetch(_ what: String) throws {
        let client = connect(mayTakeLong: true)
        let bar = isatty(2) != 0 && !json ? ProgressBar() : nil
        var fields: [(String, JSON)] = [("what", .string(what)), ("progress", .bool(bar != nil))]
        if invocation.force { fields.append(("force", .bool(true))) }
        let answer = try client.prefetch(fields) { event in
            bar?.update(phase: event["phase"]?.string ?? "", done: Int(event["done"]?.integer ?? 0),
                        total: Int(event["total"]?.integer ?? 0), bytes: event["bytes"]?.integer ?? 0)
        }
        bar?.finish()
        let warnings = (answer["warnings"]?.array ?? []).compactMap(\.string)
        for w in warnings { Output.error("cachectl: warning: \(w)\n") }
        // A feed that failed while the other was done: what was done, then the error.
        if !json, answer["ok"]?.bool == false, answer["posts"] != nil || answer["images"] != nil {
            let done = Format.prefetch(answer)
            if !done.isEmpty { print(done) }
        }
        try check(answer)
        if json { printJSON(answer) } else { print(Format.prefetch(answer)) }
        if !warnings.isEmpty {
            throw CLIError(code: .incomplete, message: "incomplete: \(warnings.count == 1 ? "a feed has" : "feeds have") more pages than the settings follow (the warning above says which setting to use)")
        }
        let failed = answer["images"]?["failed"]?.integer ?? 0
        if failed > 0 {
            throw CLIError(code: .partial, message: "\(failed) image\(failed == 1 ? "" : "s") failed to download")
        }
    }

    func printJSON(_ value: JSON) {
        print(String(decoding: value.encoded, as: UTF8.self))
    }
}

/// A one-line progress bar on stderr, redrawn in place (called from the
/// client's reader thread, one event after another).
final class ProgressBar: Sendable {
    private let lastDraw = Locked<UInt64>(0)
    /// Redrawn at most this often (the last step always).
    static let redrawInterval = Duration.milliseconds(50)

    func update(phase: String, done: Int, total: Int, bytes: Int64) {
        let now = Clock.monotonicNanoseconds()
        let draw = lastDraw.withLock { last -> Bool in
            guard done == total || Clock.elapsed(since: last, now: now) > Self.redrawInterval else { return false }
            last = now
            return true
        }
        guard draw else { return }
        let width = 30
        let filled = total > 0 ? min(width, done * width / total) : 0
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        // The phase in 7 columns, cut or padded with spaces.
        let label = phase.count >= 7 ? String(phase.prefix(7)) : phase + String(repeating: " ", count: 7 - phase.count)
        Output.error("\r\(label) [\(bar)] \(done)/\(total)  \(Format.size(bytes))\u{1B}[K")
    }

    func finish() {
        Output.error("\r\u{1B}[K")
    }
}
