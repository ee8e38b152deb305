#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// The `verify-reads` setting: when an object's bytes are hashed again
/// before they are served (docs/operations.md, "Verified reads").
public enum VerifyReads: String, Sendable, CaseIterable {
    /// Every read hashes the bytes it serves.
    case always
    /// An object hashed once is trusted while its file's device, inode,
    /// size, mtime and ctime stay the same and all its pages are in the
    /// page cache and up to date; anything else and it is hashed again.
    case onChange = "on-change"
    /// `on-change` where the file system checks data itself, else `always`.
    case auto
}

/// The mode in effect for a store, and why (said in the start-up log).
public struct ReadVerification: Sendable, Equatable {
    /// `.always` or `.onChange`, never `.auto`.
    public var mode: VerifyReads
    public var reason: String
    /// True when `auto` chose `on-change` because the file system checks
    /// data itself: a file that opts out (btrfs NOCOW) is then hashed always.
    public var fileSystemChecksums = false

    public init(mode: VerifyReads, reason: String, fileSystemChecksums: Bool = false) {
        self.mode = mode
        self.reason = reason
        self.fileSystemChecksums = fileSystemChecksums
    }

    /// What `setting` means on the file system holding `directory` (the
    /// store's objects/). `auto` looks at the file system's type and, for
    /// btrfs, at its mount options (`nodatasum` and `nodatacow` turn its
    /// data checksums off); where `auto` chose `on-change` for the file
    /// system's checksums, a file marked NOCOW is hashed on every read all
    /// the same (`Store.trustIfChecked`).
    public static func resolve(_ setting: VerifyReads, directory: FileDescriptor, realPath: String,
                               mountInfo: String? = ReadVerification.mountInfo()) -> ReadVerification {
        switch setting {
        case .always: return ReadVerification(mode: .always, reason: "verify-reads = always")
        case .onChange: return ReadVerification(mode: .onChange, reason: "verify-reads = on-change")
        case .auto: break
        }
        let type: Int64
        do throws(SystemError) { type = try directory.fileSystemType() } catch {
            return ReadVerification(mode: .always, reason: "verify-reads = auto, and the store's file system type cannot be read (\(error))")
        }
        switch type {
        case btrfsMagic:
            return onBtrfs(mountOptions: mountInfo.flatMap { mountOptions(of: realPath, in: $0) })
        case zfsMagic:
            return ReadVerification(mode: .onChange, reason: "verify-reads = auto: the store is on ZFS, which checks a checksum of every block it reads",
                                    fileSystemChecksums: true)
        default:
            return ReadVerification(mode: .always, reason: "verify-reads = auto: the store's file system (type 0x\(String(UInt64(bitPattern: type), radix: 16))) does not check the data it reads")
        }
    }

    /// `auto` on btrfs, mounted with `options`: on-change while its data
    /// checksums are on; always when mounted `nodatasum` or `nodatacow`, and
    /// when the options are not known (mountinfo unreadable, or no mount
    /// holds the store): what cannot be seen to be checked is hashed.
    static func onBtrfs(mountOptions options: [String]?) -> ReadVerification {
        guard let options else {
            return ReadVerification(mode: .always, reason: "verify-reads = auto: the store is on btrfs, but its mount options are not known (/proc/self/mountinfo cannot be read, or no mount there holds the store), so whether it checks data is not known")
        }
        if let off = options.first(where: { $0 == "nodatasum" || $0 == "nodatacow" }) {
            return ReadVerification(mode: .always, reason: "verify-reads = auto: the store is on btrfs mounted \(off), without data checksums")
        }
        return ReadVerification(mode: .onChange, reason: "verify-reads = auto: the store is on btrfs, which checks a checksum of every data block it reads from the disk",
                                fileSystemChecksums: true)
    }

    static let btrfsMagic: Int64 = 0x9123_683E
    static let zfsMagic: Int64 = 0x2FC1_2FC1

    /// /proc/self/mountinfo, or nil when it cannot be read (/proc not
    /// mounted): on btrfs that reads as checksums not known, and every read
    /// is hashed (`onBtrfs`).
    public static func mountInfo() -> String? {
        (try? FileSystem.read("/proc/self/mountinfo", limit: 4 << 20)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The mount and super-block options of the mount holding `path` (the
    /// longest mount point that is `path` or one of its parents), from
    /// mountinfo's text (proc(5): field 5 is the mount point, field 6 its
    /// options, and after the " - " separator the type, the source and the
    /// super-block options).
    static func mountOptions(of path: String, in mountInfo: String) -> [String]? {
        var best: (point: String, options: [String])?
        for line in mountInfo.split(separator: "\n") {
            let halves = line.split(separator: " - ", maxSplits: 1).map(String.init)
            let fields = halves[0].split(separator: " ").map(String.init)
            guard fields.count >= 6 else { continue }
            let point = unescape(fields[4])
            guard path == point || path.hasPrefix(point == "/" ? "/" : point + "/") else { continue }
            guard best.map({ point.count >= $0.point.count }) ?? true else { continue }
            var options = fields[5].split(separator: ",").map(String.init)
            if halves.count == 2, let superOptions = halves[1].split(separator: " ").dropFirst(2).first {
                options += superOptions.split(separator: ",").map(String.init)
            }
            best = (point, options)
        }
        return best?.options
    }

    /// mountinfo's octal escapes (`\040` for a space) undone.
    private static func unescape(_ field: String) -> String {
        guard field.contains("\\") else { return field }
        var out: [UInt8] = []
        let b = Array(field.utf8)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "\\"), i + 4 <= b.count,
               let v = UInt8(String(decoding: b[(i + 1)..<(i + 4)], as: UTF8.self), radix: 8) {
                out.append(v)
                i += 4
            } else {
                out.append(b[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The identities of object files whose bytes were hashed and matched
/// (in memory only, never logged: a restart hashes each object again the
/// first time it is read). One entry per object at most.
struct TrustedFiles: Sendable {
    private var identities: [Hash128: FileIdentity] = [:]

    func trusts(_ hash: Hash128, _ identity: FileIdentity) -> Bool { identities[hash] == identity }
    mutating func trust(_ hash: Hash128, _ identity: FileIdentity) { identities[hash] = identity }
    mutating func forget(_ hash: Hash128) { identities[hash] = nil }
    mutating func forget(_ hashes: Set<Hash128>) { for h in hashes { identities[h] = nil } }
    var count: Int { identities.count }
}
