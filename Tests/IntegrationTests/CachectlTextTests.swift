import Foundation
import Testing
import CacheProtocol
import CacheSystem

/// cachectl's text output with hostile feed text, its usage of `get`, and
/// `-o` paths it cannot write: the real cachectl against a real daemon.
@Suite struct CachectlTextTests {
    /// Characters that would break a line, a table or the terminal.
    static let nasty = "a\nb\tc\rd\u{1B}[31me\u{7}f\u{85}g\u{2028}h\u{2029}i\u{202E}j\u{0}k\\l"
    /// How cachectl shows `nasty`.
    static let shown = #"a\nb\tc\rd\u001b[31me\u0007f\u0085g\u2028h\u2029i\u202ej\u0000k\\l"#

    /// Raw characters that must never reach the text output.
    static func hasNoRawControls(_ s: String, allowingNewlines: Bool = true) -> Bool {
        !s.unicodeScalars.contains { v in
            let c = v.value
            if c == 0x0A { return !allowingNewlines }
            return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029 || (c >= 0x202A && c <= 0x202E)
        }
    }

    private static func origin() throws -> Origin {
        let origin = try Origin()
        let posts: JSON = .array([
            .object([("userId", num(1)), ("id", num(1)), ("title", .string("title " + nasty)), ("body", .string("line one\nline two " + nasty))]),
            .object([("userId", .string("u\n2")), ("id", num(2)), ("title", .string("plain")), ("body", .string("b")), ("note\nkey", .string(nasty))]),
            .object([("userId", num(3)), ("id", num(3)), ("title", .string("third")), ("body", .string("c"))]),
        ])
        try origin.write("posts.json", bytes: posts.encoded)
        let manifest: JSON = .array([
            .object([("url", .string("01-sunrise.png")), ("description", .string("desc " + nasty))]),
            .object([("url", .string("javascript:\u{2028}alert(1)\n")), ("description", .string("not fetchable"))]),
            .object([("url", .string("missing\u{85}file.png")), ("description", .string("404"))]),
        ])
        try origin.write("images/manifest.json", bytes: manifest.encoded)
        return origin
    }

    @Test func controlCharactersAreEscapedInEveryTextView() throws {
        let origin = try Self.origin()
        let daemon = try Daemon(origin: origin)
        let s = daemon.socket

        let prefetch = try cachectl(["prefetch"], socket: s)
        #expect(prefetch.status == 5, "two rows fail: \(prefetch.stderr)")
        #expect(Self.hasNoRawControls(prefetch.stdout), "\(prefetch.stdout.debugDescription)")
        let failureLines = prefetch.stdout.split(separator: "\n").filter { $0.hasPrefix("  row ") }
        #expect(failureLines.count == 2, "\(prefetch.stdout)")
        #expect(failureLines.contains { $0.hasPrefix(#"  row 1 javascript:\u2028alert(1)\n: "#) }, "\(failureLines)")
        // A fetchable URL is listed as resolved, percent-encoded like a browser's.
        #expect(failureLines.contains { $0.contains("/images/missing%C2%85file.png: ") }, "\(failureLines)")

        // The table: a header, one line per post, a total.
        let list = try cachectl(["get", "posts"], socket: s)
        #expect(list.status == 0)
        #expect(Self.hasNoRawControls(list.stdout), "\(list.stdout.debugDescription)")
        let rows = list.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(rows.count == 6, "\(list.stdout)")
        #expect(rows[1] == "    1     1  title \(Self.shown)")
        #expect(rows[2] == #"    2  u\n2  plain"#)
        #expect(rows[4] == "3 posts")

        // One post: the title on its line, the body keeps its own line breaks
        // and nothing else, extra members on one line each.
        let post = try cachectl(["get", "post", "1"], socket: s)
        #expect(post.status == 0)
        #expect(Self.hasNoRawControls(post.stdout), "\(post.stdout.debugDescription)")
        #expect(post.stdout == "Post 1 by user 1\nTitle: title \(Self.shown)\n\nline one\nline two " + Self.shown.replacingOccurrences(of: #"a\nb"#, with: "a\nb") + "\n")
        let post2 = try cachectl(["get", "post", "2"], socket: s)
        #expect(post2.stdout.hasSuffix("\n\n" + #"note\nkey: "# + Self.shown + "\n"), "\(post2.stdout)")
        #expect(post2.stdout.hasPrefix(#"Post 2 by user u\n2"#))

        // Images: the row's description and URLs.
        let image = try cachectl(["get", "image", "0"], socket: s)
        #expect(image.status == 0)
        #expect(image.stdout.hasPrefix("Row 0: desc \(Self.shown)\nurl:   http://"), "\(image.stdout)")
        #expect(Self.hasNoRawControls(image.stdout))
        let images = try cachectl(["get", "images"], socket: s)
        #expect(Self.hasNoRawControls(images.stdout), "\(images.stdout.debugDescription)")
        #expect(images.stdout.split(separator: "\n").count == 5, "\(images.stdout)")
        #expect(images.stdout.contains(#"javascript:\u2028alert(1)\n"#))

        // An error message from the daemon stays on one line of stderr.
        let failed = try cachectl(["get", "image", "1"], socket: s)
        #expect(failed.status == 6)
        #expect(failed.stderr.split(separator: "\n").count == 1 && Self.hasNoRawControls(failed.stderr), "\(failed.stderr.debugDescription)")
    }

    /// Long MIME types (image/vnd.microsoft.icon) widen the TYPE column instead of being cut.
    @Test func theImageTableFitsEveryType() throws {
        let origin = try Origin()
        let ico = Array(try Data(contentsOf: URL(fileURLWithPath: Paths.packageRoot + "/Tests/Fixtures/images/sample.ico")))
        try origin.write("images/icon.ico", bytes: ico)
        try origin.write("images/manifest.json", #"[{"url": "icon.ico"}, {"url": "01-sunrise.png"}, {"url": "nothing.png"}]"#)
        let daemon = try Daemon(origin: origin)
        _ = try cachectl(["prefetch", "images"], socket: daemon.socket)
        let lines = try cachectl(["get", "images"], socket: daemon.socket).stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 5, "\(lines)")
        #expect(lines[1].contains("image/vnd.microsoft.icon  http://"), "\(lines)")
        #expect(lines[2].contains("image/png                 http://"), "\(lines)")
        #expect(lines[3].contains("-                         http://"), "\(lines)")
        // Every URL starts in the same column as the header's URL.
        let column = lines[0].range(of: "URL")!.lowerBound.utf16Offset(in: lines[0])
        for line in lines[1...3] { #expect(line.range(of: "http://")?.lowerBound.utf16Offset(in: line) == column, "\(line)") }
    }

    @Test func getWithoutASubjectSaysWhatItExpects() throws {
        let scratch = Scratch()
        // No daemon needed: it is a usage error before any connection.
        for args in [["get"], ["--json", "get"]] {
            let r = try cachectl(args, socket: scratch.path + "/none.sock")
            #expect(r.status == 2, "\(args): \(r.stderr)")
            #expect(r.stdout.isEmpty)
            #expect(r.stderr == "cachectl: get needs what to get: post ID | posts [--query TEXT] [--offset N] [--limit N] | image ROW [--width W] [--height H] [--fit F] [--format F] [-o FILE] "
                    + "| images [--offset N] [--limit N] | objects HASH... [-o DIR] (see cachectl --help)\n", "\(r.stderr)")
        }
        let r = try cachectl(["get", "everything"], socket: scratch.path + "/none.sock")
        #expect(r.status == 2)
        #expect(r.stderr == "cachectl: get expects post ID | posts [--query TEXT] [--offset N] [--limit N] | image ROW [--width W] [--height H] [--fit F] [--format F] [-o FILE] "
                + "| images [--offset N] [--limit N] | objects HASH... [-o DIR], not \"everything\"\n", "\(r.stderr)")
    }

    @Test func outputPathsThatCannotBeWrittenGetAPlainError() throws {
        let origin = try Origin()
        let daemon = try Daemon(origin: origin)
        let s = daemon.socket
        let dir = daemon.scratch.path + "/out"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        try Data("x".utf8).write(to: URL(fileURLWithPath: dir + "/file.txt"))
        let cases: [(path: String, reason: String)] = [
            (dir, "Is a directory"),
            (dir + "/", "Is a directory"),
            (dir + "/no/such/dir/row5.png", "No such file or directory"),
            (dir + "/file.txt/row5.png", "Not a directory"),
            // Where even root cannot create a file: the temp file's own open fails.
            ("/sys/row5.png", "Permission denied"),
        ]
        for c in cases {
            let r = try cachectl(["get", "image", "5", "-o", c.path], socket: s)
            #expect(r.status == 1, "\(c.path): \(r.stderr)")
            #expect(r.stderr == "cachectl: cannot write \(c.path): \(c.reason)\n", "\(c.path): \(r.stderr)")
            #expect(!r.stderr.contains(".cachectl") && !r.stderr.contains("errno"), "\(r.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["file.txt"], "no temp file is left behind")
        // A directory that is fine gets only the file.
        let ok = try cachectl(["get", "image", "5", "-o", dir + "/row5.png"], socket: s)
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["file.txt", "row5.png"])
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/row5.png"))) == (try origin.read("images/06-rose.png")))
    }
}
