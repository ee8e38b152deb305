import CacheSystem

/// What `posts.state` holds (docs/storage-format.md, "The posts' state"):
/// written when the daemon stops cleanly with every file in `posts/`
/// matching the log, it names `index.log` and `posts/` as they were then
/// (`FileIdentity`: device, inode, size, and the modification and change
/// times to the nanosecond). A store opened with both still as named needs
/// no reconciliation of `posts/`: nothing was written there, or to the log,
/// since they last matched. Any rename or removal in `posts/` (the store
/// writes a post file by a rename into it) moves the directory's change
/// time, and any append to the log its size and times.
struct PostsState: Sendable, Equatable {
    /// `index.log` when the daemon stopped.
    var log: FileIdentity
    /// `posts/` when the daemon stopped.
    var posts: FileIdentity

    static let header = "cached posts state 1"
    /// Far more than the four lines ever take: a longer file is not one.
    static let maxBytes = 1024

    /// The file's bytes: the header, a `log` and a `posts` line (device,
    /// inode, size, modification and change times in nanoseconds, in
    /// decimal), and `check` with the XXH3-128 of every byte before it.
    var encoded: [UInt8] {
        let text = Self.header + "\n" + "log " + Self.fields(log) + "\n" + "posts " + Self.fields(posts) + "\n"
        let body = Array(text.utf8)
        return body + Array("check \(Hash128(of: body).hex)\n".utf8)
    }

    private static func fields(_ f: FileIdentity) -> String {
        "\(f.device) \(f.inode) \(f.size) \(f.modified) \(f.changed)"
    }

    init(log: FileIdentity, posts: FileIdentity) {
        self.log = log
        self.posts = posts
    }

    /// Reads the file's bytes back; throws what is wrong with them.
    init(decoding bytes: [UInt8]) throws(PostsStateDamage) {
        guard bytes.count <= Self.maxBytes else { throw PostsStateDamage("longer than \(Self.maxBytes) bytes") }
        let suffixLength = "check ".utf8.count + 32 + 1
        guard bytes.count >= suffixLength, bytes.last == UInt8(ascii: "\n") else { throw PostsStateDamage("it is cut short") }
        let split = bytes.count - suffixLength
        let body = Array(bytes[..<split])
        guard Array(bytes[split...]) == Array("check \(Hash128(of: body).hex)\n".utf8) else {
            throw PostsStateDamage("its check does not match its bytes")
        }
        let lines = String(decoding: body, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        guard lines.count == 3, lines.first == Substring(Self.header) else {
            throw PostsStateDamage("it is not \"\(Self.header)\" and two lines")
        }
        let rest = Array(lines.dropFirst())
        self.init(log: try Self.identity(rest[0], "log"), posts: try Self.identity(rest[1], "posts"))
    }

    /// The identity on a line `key DEVICE INODE SIZE MODIFIED CHANGED`.
    private static func identity(_ line: Substring, _ key: String) throws(PostsStateDamage) -> FileIdentity {
        let words = line.split(separator: " ", omittingEmptySubsequences: false)
        guard words.count == 6, words[0] == Substring(key), let device = UInt64(words[1]), let inode = UInt64(words[2]),
              let size = Int64(words[3]), let modified = Int64(words[4]), let changed = Int64(words[5]) else {
            throw PostsStateDamage("an unexpected line \"\(Printable.escaped(Array(line.utf8), limit: 80))\"")
        }
        return FileIdentity(device: device, inode: inode, size: size, modified: modified, changed: changed)
    }
}

/// Why `posts.state` could not be taken as it is.
struct PostsStateDamage: Error, Sendable, Equatable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
