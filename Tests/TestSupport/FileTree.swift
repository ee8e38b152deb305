import Foundation

/// Trees of files planted for a test and read back to prove what changed.
///
/// A tree is described as relative paths mapped to contents: a file's text,
/// `-> TARGET` for a symbolic link, and (in a snapshot) `""` for a directory,
/// whose path ends in `/`.
public enum FileTree {
    /// Creates each file (its directories as needed) or link of `files` under `root`.
    public static func plant(_ root: String, _ files: [String: String]) throws {
        for (rel, text) in files {
            let p = root + "/" + rel
            try FileManager.default.createDirectory(atPath: (p as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            if text.hasPrefix("-> ") {
                try FileManager.default.createSymbolicLink(atPath: p, withDestinationPath: String(text.dropFirst(3)))
            } else {
                try Data(text.utf8).write(to: URL(fileURLWithPath: p))
            }
        }
    }

    /// Every entry under `root`, links never followed: directories as
    /// `rel/`, each regular file with its text (`?` when unreadable), each
    /// link as `-> TARGET`: what a test proves did not change.
    public static func snapshot(_ root: String) -> [String: String] {
        var out: [String: String] = [:]
        func walk(_ rel: String) {
            let dir = rel.isEmpty ? root : root + "/" + rel
            for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
                let r = rel.isEmpty ? name : rel + "/" + name
                let p = root + "/" + r
                var st = stat()
                guard lstat(p, &st) == 0 else { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR: out[r + "/"] = ""; walk(r)
                case S_IFLNK: out[r] = "-> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: p)) ?? "?")
                default: out[r] = (try? String(contentsOfFile: p, encoding: .utf8)) ?? "?"
                }
            }
        }
        walk("")
        return out
    }

    /// 30 lowercase hex digits: an object's file name below its fan-out directory.
    public static let hex30 = String(repeating: "0123456789abcde", count: 2)

    /// Someone else's entries in a store's `tmp/`, `posts/` and `objects/`,
    /// links among them pointing at `outside`: none has a name and kind of
    /// the store's own (docs/storage-format.md, "The store's own names").
    /// `objects/zz` and `objects/a` are directories that are no fan-out.
    public static func foreignInStore(outside: String) -> [String: String] {
        [
            "tmp/notes.txt": "notes", "tmp/README": "read me", "tmp/1-2-3.tmp.bak": "a backup",
            "tmp/link": "-> " + outside,
            "posts/notes.txt": "notes", "posts/007.json": "not how the store spells 7", "posts/README": "read me",
            "posts/5.json.orig": "an editor's copy", "posts/link.json": "-> " + outside,
            "objects/README": "read me", "objects/zz/" + hex30: "not a fan-out", "objects/ab/notes.txt": "notes",
            "objects/ab/" + hex30.uppercased(): "upper case", "objects/ab/" + hex30 + "0": "31 digits",
            "objects/a/b" + hex30: "a one-digit fan-out", "objects/cd/" + hex30: "-> " + outside,
        ]
    }

    /// The directories of `foreignInStore` that are no fan-out: each is
    /// reported as a directory, what is in it never looked at.
    public static let foreignFanOuts = ["zz", "a"]
}
