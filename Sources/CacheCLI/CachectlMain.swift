#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CacheSystem
import CachedClientCore

/// Exit statuses of cachectl, documented in `--help` and docs/operations.md.
public enum ExitCode: Int32, Sendable {
    case ok = 0
    /// The daemon answered with an error other than the ones below.
    case failure = 1
    /// The command line is wrong.
    case usage = 2
    /// The daemon is not running (nothing listens on the socket), or does not
    /// answer within the timeout (stopped, hung, a listener that never accepts).
    case notRunning = 3
    /// The post, row or object does not exist, or the row is not cached.
    case notFound = 4
    /// A prefetch finished but some images failed.
    case partial = 5
    /// A feed could not be fetched or parsed.
    case upstream = 6
    /// A prefetch finished, but a feed's last page has more pages than its
    /// settings follow: what was stored is less than the feed holds.
    case incomplete = 7
    /// `get posts` or `get images` read page by page, and the listing
    /// changed between two pages (a refresh or a delete in between): what
    /// was printed may miss or repeat entries.
    case changed = 8
}

/// Writes to the standard streams straight through their descriptors.
enum Output {
    /// `text` to stderr, unbuffered (messages, the progress bar).
    static func error(_ text: String) {
        // Nowhere left to say that stderr failed; the exit status still tells.
        try? FileDescriptor(rawValue: 2, path: "stderr").writeAll(Array(text.utf8))
    }
}

/// A reason to stop, with the exit status and the one line for stderr.
struct CLIError: Error {
    var code: ExitCode
    var message: String
}

/// The `cachectl` executable.
public enum CachectlMain {
    public static func run() -> Never {
        let env = Environment.current()
        do {
            let invocation = try Invocation.parse(Array(CommandLine.arguments.dropFirst()), environment: env)
            if invocation.command == ["help"] {
                print(Invocation.usage)
                exit(0)
            }
            if invocation.command == ["version"] {
                print(Invocation.version)
                exit(0)
            }
            try Commands(invocation: invocation).run()
            exit(ExitCode.ok.rawValue)
        } catch let e as CLIError {
            // What was printed first (a partial prefetch's summary) comes
            // before the error also when both streams go to one pipe.
            fflush(nil)  // every output stream (stdout is a C global Swift 6 will not name)
            Output.error("cachectl: \(e.message)\n")
            exit(e.code.rawValue)
        } catch let e as CachedError {
            // The daemon's error answers are CLIErrors by now: these are the
            // transport's (not running, timed out, closed, untrusted, malformed).
            let code: ExitCode = e.isNotRunning ? .notRunning : e.code == .changed ? .changed : .failure
            Output.error("cachectl: \(e.message)\n")
            exit(code.rawValue)
        } catch {
            Output.error("cachectl: \(error)\n")
            exit(ExitCode.failure.rawValue)
        }
    }
}

/// The parsed command line.
struct Invocation {
    var socket: String
    /// True when `--socket` named it: then its directory may be another user's.
    var socketNamed = false
    var json = false
    var command: [String] = []
    var output: String?
    /// `get posts --query TEXT`: only posts whose title holds TEXT.
    var query: String?
    /// `get posts` and `get images` `--offset N` and `--limit N`: that page
    /// of the listing; without them, all of it.
    var offset: Int?
    var limit: Int?
    /// `get image ROW --width W ...`: the members of `get_image`'s `variant`.
    var variant: [(String, JSON)] = []
    var force = false
    /// `get post --string ID`, `delete post --string ID`: the string id of
    /// that spelling first, where the text spells an integer (a feed that
    /// holds both `5` and `"5"`; docs/protocol.md, "Post ids").
    var stringID = false
    /// Seconds to wait for the daemon (see `Commands.connect`); 0 for no limit.
    var timeout = Invocation.defaultTimeout

    /// The timeout when neither `--timeout` nor `CACHED_TIMEOUT` is given.
    static let defaultTimeout = 10.0

    /// What `--version` prints: this cachectl's version and the protocol it speaks.
    static let version = "cachectl \(cachedVersion) (protocol \(protocolVersion))"

    static let usage = """
    usage: cachectl [--socket PATH | --instance NAME] [--timeout SECONDS] [--json] COMMAND
           cachectl --version | --help

    commands:
      get post [--string] ID           print one post (ID may be negative: get post -5);
                                       an ID spelled as an integer is the integer id
                                       first, with --string the string id first
      get posts [--query TEXT]         all posts, ascending id; with --query those whose
        [--offset N] [--limit N]       title holds TEXT (any case, at most 256 bytes);
                                       with --offset and --limit, that page of them
      get image ROW [-o FILE]          an image's metadata, or its bytes into FILE (- for stdout)
        [--width W] [--height H]       a variant of it instead: fitted into W x H pixels,
        [--fit contain|cover]          or covering it (cropped), as jpeg, png, webp or avif
        [--format F]                   (default: the original's format, else webp)
      get images [--offset N] [--limit N]
                                       all rows with their cache state (or that page)
      get objects HASH... [-o DIR]     objects by hash, 64 to a request: each one's hash
                                       and size, or its bytes into DIR/HASH (- : all on
                                       stdout, in order); one that fails is named on stderr
      prefetch [all|posts|images] [--force]
                                       refresh the feeds and download missing images
      delete post [--string] ID        remove one post from the store (one a feed kept
                                       with posts-keep; a feed that still lists it brings
                                       it back when it next reads that page whole: when
                                       the page changes, or at every refresh from an
                                       origin that sends no ETag or Last-Modified)
      status                           counts and counters
      verify                           re-hash every object, repair corrupt ones
      gc                               delete unreferenced object files
      compact                          rewrite the index log with live records only
      ping                             check that the daemon answers
      metrics                          the counters in the Prometheus text format

    options:
      --socket PATH   the daemon's socket (default: $CACHED_SOCKET, else the
                      per-user or system default)
      --instance NAME the socket of cached@NAME.service: /run/cached/NAME.sock
      --timeout SECONDS
                      give up when the daemon does not answer within SECONDS
                      (default: $CACHED_TIMEOUT, else 10; 0 waits forever).
                      ping, status, metrics and get post(s) must be answered
                      within it; the commands that may take long (get image(s),
                      prefetch, verify, gc, compact) wait as long as the
                      daemon answers a ping within it every SECONDS
      --json          print the daemon's JSON answers instead of text (get posts
                      and get images: one answer line per page of 999 entries)
      --version       print cachectl's version and protocol, then exit
      --              end of options: every later word is a command word

    exit status: 0 success, 1 error (the store's, such as a full disk), 2 usage,
    3 daemon not running or not answering (or stopping), 4 not found or not
    cached, 5 prefetch with failed images, 6 the origin failed (a feed, or the
    image of get image), 7 prefetch incomplete: a feed has more pages than its
    settings follow (a warning names the setting to use), 8 the posts or rows
    changed while get posts or get images read them page by page (list again).
    """

    static func parse(_ args: [String], environment: [String: String]) throws -> Invocation {
        var inv = Invocation(socket: DefaultPaths.clientSocket(environment: environment))
        if let value = environment["CACHED_TIMEOUT"], !value.isEmpty {
            guard let seconds = seconds(value) else {
                throw CLIError(code: .usage, message: "CACHED_TIMEOUT must be a number of seconds (0 for no limit), not \"\(Format.visible(value))\"")
            }
            inv.timeout = seconds
        }
        var i = 0
        var optionsEnded = false
        /// The option that named the socket, if one did: only one may.
        var socketOption: String?
        func nameSocket(_ option: String, _ path: String) throws {
            if let earlier = socketOption {
                throw CLIError(code: .usage, message: "\(earlier) and \(option) both name the socket; give one")
            }
            socketOption = option
            inv.socket = path
            inv.socketNamed = option == "--socket"
        }
        while i < args.count {
            let a = args[i]
            i += 1
            // After `--`, and where an ID or ROW is due (get post -5), a word is never an option.
            if optionsEnded || (inv.expectsNumber && Int64(a) != nil) {
                inv.command.append(a)
                continue
            }
            switch a {
            case "--":
                optionsEnded = true
            case "--help", "-h", "help":
                inv.command = ["help"]
                return inv
            case "--version", "-V":
                inv.command = ["version"]
                return inv
            case "--json": inv.json = true
            case "--force", "-f": inv.force = true
            case "--string": inv.stringID = true
            case "--socket", "-s":
                guard i < args.count else { throw CLIError(code: .usage, message: "--socket needs a path") }
                try nameSocket("--socket", args[i])
                i += 1
            case "--instance":
                guard i < args.count else { throw CLIError(code: .usage, message: "--instance needs a name (cached@NAME.service)") }
                try nameSocket("--instance", try instanceSocket(args[i]))
                i += 1
            case "--timeout":
                guard i < args.count else { throw CLIError(code: .usage, message: "--timeout needs a number of seconds (0 for no limit)") }
                inv.timeout = try timeoutOption(args[i])
                i += 1
            case "-o", "--output":
                guard i < args.count else { throw CLIError(code: .usage, message: "-o needs a file name (or - for stdout)") }
                inv.output = args[i]
                i += 1
            case "--width", "--height", "--fit", "--format":
                guard i < args.count else { throw CLIError(code: .usage, message: "\(a) needs a value") }
                inv.variant.append(try variantOption(a, args[i]))
                i += 1
            case "--query", "-q":
                guard i < args.count else { throw CLIError(code: .usage, message: "--query needs the text to search titles for") }
                inv.query = args[i]
                i += 1
            case "--offset", "--limit":
                guard i < args.count else { throw CLIError(code: .usage, message: "\(a) needs a number") }
                try inv.page(a, args[i])
                i += 1
            default:
                if a.hasPrefix("--query=") { inv.query = String(a.dropFirst(8)) }
                else if a.hasPrefix("--socket=") { try nameSocket("--socket", String(a.dropFirst(9))) }
                else if a.hasPrefix("--instance=") { try nameSocket("--instance", try instanceSocket(String(a.dropFirst(11)))) }
                else if a.hasPrefix("--timeout=") { inv.timeout = try timeoutOption(String(a.dropFirst(10))) }
                else if a.hasPrefix("--offset=") || a.hasPrefix("--limit=") {
                    let parts = a.split(separator: "=", maxSplits: 1)
                    try inv.page(String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
                }
                else if a.hasPrefix("-") && a != "-" { throw CLIError(code: .usage, message: "unknown option \(Format.visible(a)) (see cachectl --help)") }
                else { inv.command.append(a) }
            }
        }
        guard !inv.command.isEmpty else { throw CLIError(code: .usage, message: "no command given (see cachectl --help)") }
        if !inv.variant.isEmpty && !(inv.command.count == 3 && inv.command.prefix(2) == ["get", "image"]) {
            throw CLIError(code: .usage, message: "--width, --height, --fit and --format go with get image ROW")
        }
        if inv.stringID && !(inv.command.count == 3 && (inv.command.prefix(2) == ["get", "post"] || inv.command.prefix(2) == ["delete", "post"])) {
            throw CLIError(code: .usage, message: "--string goes with get post ID and delete post ID")
        }
        if inv.offset != nil || inv.limit != nil, inv.command != ["get", "posts"] && inv.command != ["get", "images"] {
            throw CLIError(code: .usage, message: "--offset and --limit go with get posts and get images")
        }
        if let q = inv.query {
            guard inv.command == ["get", "posts"] else { throw CLIError(code: .usage, message: "--query goes with get posts") }
            guard q.utf8.count <= Request.maxQueryBytes else {
                throw CLIError(code: .usage, message: "--query is at most \(Request.maxQueryBytes) bytes")
            }
        }
        return inv
    }

    /// `--offset N` or `--limit N`: a count as the protocol takes it, 0 to 2^31-1.
    private mutating func page(_ option: String, _ value: String) throws {
        guard let n = Int(value), n >= 0, n <= Int(Int32.max) else {
            throw CLIError(code: .usage, message: "\(option) takes a number from 0 to \(Int32.max), not \"\(Format.visible(value))\"")
        }
        if option == "--offset" { offset = n } else { limit = n }
    }

    /// Whether the next command word is a post ID or row number: right
    /// after `get post`, `delete post` or `get image`.
    private var expectsNumber: Bool {
        command == ["get", "post"] || command == ["delete", "post"] || command == ["get", "image"]
    }

    /// One of `--width`, `--height`, `--fit`, `--format` as a member of
    /// `get_image`'s `variant` (the daemon checks its own bounds).
    private static func variantOption(_ option: String, _ value: String) throws -> (String, JSON) {
        switch option {
        case "--width", "--height":
            guard let n = Int(value), n >= 1, n <= 65535 else {
                throw CLIError(code: .usage, message: "\(option) takes a number of pixels from 1 to 65535, not \"\(Format.visible(value))\"")
            }
            return (option == "--width" ? "w" : "h", .number(String(n)))
        case "--fit":
            guard VariantFit(name: value) != nil else { throw CLIError(code: .usage, message: "--fit is contain or cover, not \"\(Format.visible(value))\"") }
            return ("fit", .string(value))
        default:
            guard VariantFormat(name: value) != nil else {
                throw CLIError(code: .usage, message: "--format is one of jpeg, png, webp, avif, not \"\(Format.visible(value))\"")
            }
            return ("format", .string(value))
        }
    }

    /// Where the template units put an instance's socket (systemd/cached@.socket).
    static let instanceDirectory = "/run/cached"

    /// The socket of instance `name`: `/run/cached/NAME.sock`. A name is
    /// visible ASCII without `/`, not starting with `.`, short enough for a
    /// socket path.
    static func instanceSocket(_ name: String) throws -> String {
        let path = "\(instanceDirectory)/\(name).sock"
        guard !name.isEmpty, !name.hasPrefix("."), name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }),
              path.utf8.count <= 107 else {
            throw CLIError(code: .usage, message: "--instance takes the NAME of cached@NAME.service, such as blog, not \"\(Format.visible(name))\"")
        }
        return path
    }

    /// A finite, non-negative number of seconds, or nil.
    private static func seconds(_ text: String) -> Double? {
        guard let v = Double(text), v.isFinite, v >= 0 else { return nil }
        return v
    }

    private static func timeoutOption(_ text: String) throws -> Double {
        guard let v = seconds(text) else {
            throw CLIError(code: .usage, message: "--timeout needs a number of seconds (0 for no limit), not \"\(Format.visible(text))\"")
        }
        return v
    }
}
