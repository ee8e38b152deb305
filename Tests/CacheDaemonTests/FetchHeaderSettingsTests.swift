import Testing
import Glibc
import Foundation
@_spi(Harness) @testable import CacheDaemon
import CacheFetch

/// `fetch-header` and `fetch-header-file` through the real parser: every
/// source adds headers, the file is trusted only when no one else can read
/// it, and no value is ever shown.
@Suite struct FetchHeaderSettingsTests {
    static let secret = "Sekr1t-\(UInt32.random(in: 1...UInt32.max))"

    /// A private directory under /tmp, removed by `done`.
    final class Directory {
        let path: String
        init() throws {
            var template = Array("/tmp/cached-fh-XXXXXX".utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { throw SettingsError("mkdtemp") }
            path = String(cString: made)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        func write(_ name: String, _ text: String, mode: mode_t = 0o600) throws -> String {
            let file = path + "/" + name
            try text.write(toFile: file, atomically: false, encoding: .utf8)
            #expect(chmod(file, mode) == 0)
            return file
        }
    }

    static func parse(_ arguments: [String], _ environment: [String: String] = [:]) throws(SettingsError) -> Settings {
        switch try Settings.parse(arguments: ["--config", "/dev/null"] + arguments, environment: environment) {
        case .run(let s), .checked(let s): return s
        default: throw SettingsError("not settings")
        }
    }

    static func refusal(_ arguments: [String], _ environment: [String: String] = [:]) -> String {
        do { _ = try parse(arguments, environment); return "accepted" } catch { return error.message }
    }

    @Test func everySourceAddsHeadersAndALaterOneOfANameReplacesTheEarlier() throws {
        let dir = try Directory()
        let conf = try dir.write("cached.conf", """
            fetch-header = Authorization: Bearer old
            fetch-header = "X-Api-Key: k #1"
            """, mode: 0o644)
        let s = try Self.parse(["--config", conf, "--fetch-header", "authorization: Bearer \(Self.secret)"],
                               ["CACHED_FETCH_HEADER": "X-Tenant: blue"])
        #expect(s.fetchHeaders.map(\.name) == ["X-Api-Key", "X-Tenant", "authorization"])
        #expect(s.fetchHeaders.map(\.value) == ["k #1", "blue", "Bearer \(Self.secret)"])
        #expect(Settings.spec("fetch-header")?.show(s) == "X-Api-Key: <redacted>, X-Tenant: <redacted>, authorization: <redacted>")
    }

    @Test func aBadHeaderNamesTheSettingAndNotTheValue() {
        #expect(Self.refusal(["--fetch-header", "Host: \(Self.secret)"]).hasPrefix("--fetch-header: fetch-header Host is sent by cached itself"))
        #expect(Self.refusal(["--fetch-header", "X: a\r\n\(Self.secret)"]) == "--fetch-header: fetch-header X has a value holding a control "
                + "character (CR, LF, NUL or another), which would end or split the request's header")
        #expect(Self.refusal([], ["CACHED_FETCH_HEADER": "Bearer \(Self.secret)"])
                == "CACHED_FETCH_HEADER: fetch-header must be \"Name: value\", and there is no colon")
    }

    /// A mistyped line is quoted up to where a setting's name ends: what
    /// follows may be the secret.
    @Test func aMistypedLineIsNotQuotedPastTheName() throws {
        let dir = try Directory()
        for line in ["fetch-header: X-Api-Key: \(Self.secret)", "fetch-header X-Api-Key: \(Self.secret)=="] {
            let conf = try dir.write("cached.conf", "posts-url = http://a/p.json\n\(line)\n", mode: 0o644)
            let message = Self.refusal(["--config", conf])
            #expect(message.hasPrefix("\(conf):2: "), "\(message)")
            #expect(message.contains("\"fetch-header...\"") && !message.contains(Self.secret), "\(message)")
        }
        let flag = Self.refusal(["--fetch-header:X-Api-Key:\(Self.secret)=x"])
        #expect(flag == "unknown option --fetch-header... (see --help)")
        #expect(Self.refusal(["--max-sise", "1"]) == "unknown option --max-sise (see --help)")
    }

    @Test func theyGoToTheOriginsOfPostsURLAndImagesURL() throws {
        let s = try Self.parse(["--posts-url", "https://Feeds.Example/p.json", "--images-url", "http://img.example:8080/m.json",
                                "--images-base-url", "https://cdn.example/", "--fetch-header", "X-Api-Key: \(Self.secret)"])
        #expect(s.fetchCredentials.origins == [URLOrigin("https://feeds.example")!, URLOrigin("http://img.example:8080")!])
        #expect(s.serviceConfiguration.credentials == s.fetchCredentials)
    }

    @Test func aReloadNamesAChangedHeaderButNeverItsValue() throws {
        let running = try Self.parse(["--fetch-header", "X-Api-Key: one-\(Self.secret)"])
        let same = try Self.parse(["--fetch-header", "X-Api-Key: one-\(Self.secret)"])
        #expect(running.reloadPlan(to: same).changes == [])
        let fresh = try Self.parse(["--fetch-header", "X-Api-Key: two-\(Self.secret)"])
        let plan = running.reloadPlan(to: fresh)
        #expect(plan.changes == ["fetch-header X-Api-Key: <redacted> -> X-Api-Key: <redacted>"])
        #expect(plan.needRestart == [])
        #expect(plan.applied.fetchCredentials.headers.map(\.value) == ["two-\(Self.secret)"])
    }

    @Test func theFileIsReadWithCommentsAndMayLiveInTheCredentialsDirectory() throws {
        let dir = try Directory()
        _ = try dir.write("feed-token", "# from LoadCredential=\nAuthorization: Bearer \(Self.secret)\n\nX-Api-Key: k\n", mode: 0o400)
        let s = try Self.parse(["--fetch-header-file", "${CREDENTIALS_DIRECTORY}/feed-token", "--fetch-header", "X-Tenant: t"],
                               ["CREDENTIALS_DIRECTORY": dir.path])
        #expect(s.allFetchHeaders.map(\.name) == ["X-Tenant", "Authorization", "X-Api-Key"])
        #expect(s.allFetchHeaders[1].value == "Bearer \(Self.secret)")
        #expect(Settings.spec("fetch-header-file")?.show(s) == "${CREDENTIALS_DIRECTORY}/feed-token (Authorization: <redacted>, X-Api-Key: <redacted>)")
        #expect(Self.refusal(["--fetch-header-file", "$CREDENTIALS_DIRECTORY/feed-token"]).contains("CREDENTIALS_DIRECTORY is not set"))
        #expect(Self.refusal(["--fetch-header-file", "feed-token"]).contains("must be an absolute path"))
    }

    @Test(arguments: [(mode_t(0o644), "every user"), (mode_t(0o640), "its group"), (mode_t(0o604), "every user")])
    func aFileOthersCanReadIsRefusedNamingTheFix(_ mode: mode_t, _ who: String) throws {
        let dir = try Directory()
        let file = try dir.write("token", "Authorization: Bearer \(Self.secret)\n", mode: mode)
        #expect(Self.refusal(["--fetch-header-file", file]) == "refusing to read the fetch-header-file: \(file) can be read by \(who) "
                + "(mode \(String(mode, radix: 8))); it holds secrets that no other user may read (chmod go-rw \(file))")
    }

    @Test func aLinkAWritableFileAndAConflictAreRefused() throws {
        let dir = try Directory()
        let file = try dir.write("token", "X-Api-Key: \(Self.secret)\n")
        #expect(symlink(file, dir.path + "/link") == 0)
        #expect(Self.refusal(["--fetch-header-file", dir.path + "/link"])
                == "refusing to read the fetch-header-file: \(dir.path)/link is a symbolic link; name the file itself")
        #expect(Self.refusal(["--fetch-header-file", file, "--fetch-header", "x-api-key: other"])
                == "X-Api-Key is given by both fetch-header and fetch-header-file \(file); give it once")
        let empty = try dir.write("empty", "# nothing yet\n")
        #expect(Self.refusal(["--fetch-header-file", empty]) == "fetch-header-file \(empty) holds no \"Name: value\" line")
        let bad = try dir.write("bad", "X-Api-Key: k\n\(Self.secret)\n")
        #expect(Self.refusal(["--fetch-header-file", bad]) == "fetch-header-file \(bad):2: must be \"Name: value\", and there is no colon")
        #expect(chmod(file, 0o620) == 0)
        #expect(Self.refusal(["--fetch-header-file", file]).contains("\(file) can be written by its group"))
        #expect(Self.refusal(["--fetch-header-file", dir.path + "/missing"]).hasPrefix("fetch-header-file \(dir.path)/missing: "))
        #expect(Self.refusal(["--fetch-header-file", dir.path]) == "refusing to read the fetch-header-file: \(dir.path) is not a regular file")
        #expect(mkfifo(dir.path + "/fifo", 0o600) == 0)
        #expect(Self.refusal(["--fetch-header-file", dir.path + "/fifo"]) == "refusing to read the fetch-header-file: \(dir.path)/fifo is not a regular file")
    }

    @Test func onlyTheFileThatWinsIsRead() throws {
        let dir = try Directory()
        let open = try dir.write("open", "X-Api-Key: \(Self.secret)\n", mode: 0o644)
        let closed = try dir.write("closed", "X-Api-Key: \(Self.secret)\n")
        let s = try Self.parse(["--fetch-header-file", closed], ["CACHED_FETCH_HEADER_FILE": open])
        #expect(s.fetchHeaderFile?.path == closed && s.allFetchHeaders.count == 1)
    }
}
