import Foundation
import Testing
import CacheSystem
@testable import CacheProtocol

/// A fresh directory under /tmp that only root can enter, removed at the end.
private final class TempDirectory {
    let path: String
    init() {
        var template = Array("/tmp/cached-pt-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// A directory inside, with `owner` and `mode` (set after creation, so umask-proof).
    func directory(_ name: String, owner: uid_t = geteuid(), mode: mode_t) -> String {
        let dir = path + "/" + name
        mkdir(dir, 0o700)
        chown(dir, owner, gid_t(owner))
        chmod(dir, mode)
        return dir
    }
}

/// Which socket directories `SocketDirectory.problem` lets cachectl use,
/// with real owners (nobody, uid 65534) and modes. The tests run as root.
@Suite struct SocketDirectoryTests {
    static let nobody: uid_t = 65534

    @Test func thePerUserDirectoryMustBeTheCallersAndPrivate() {
        let temp = TempDirectory()
        let mine = temp.directory("mine", mode: 0o700)
        #expect(SocketDirectory.problem(socket: mine + "/cached.sock", privateDirectory: mine) == nil)
        // Spelled differently, it is still the per-user directory.
        #expect(SocketDirectory.problem(socket: mine + "//cached.sock", privateDirectory: mine) == nil)

        let foreign = temp.directory("foreign", owner: Self.nobody, mode: 0o700)
        let me = geteuid()
        #expect(SocketDirectory.problem(socket: foreign + "/cached.sock", privateDirectory: foreign) ==
                "\(foreign) is owned by uid 65534, not by uid \(me) who runs this; that user could replace what is in it " +
                "(have it removed, which in a sticky /tmp takes its owner or root; or chown \(me) \(foreign) and chmod 0700 \(foreign); " +
                "or choose another path, such as one under XDG_RUNTIME_DIR)")
        // The same directory as any other socket directory: another user's, only they can write it: fine.
        #expect(SocketDirectory.problem(socket: foreign + "/cached.sock", privateDirectory: mine) == nil)
        // Found by inode, however it is spelled.
        #expect(SocketDirectory.problem(socket: temp.path + "/./foreign/cached.sock", privateDirectory: foreign) != nil)

        let open = temp.directory("open", mode: 0o777)
        #expect(SocketDirectory.problem(socket: open + "/cached.sock", privateDirectory: open)?.contains("can be written by every user (mode 777)") == true)
        let sticky = temp.directory("sticky", mode: 0o1777)
        #expect(SocketDirectory.problem(socket: sticky + "/cached.sock", privateDirectory: sticky)?.contains("mode 1777") == true,
                "sticky is no excuse for the per-user directory")

        let link = temp.path + "/link"
        symlink(mine, link)
        #expect(SocketDirectory.problem(socket: link + "/cached.sock", privateDirectory: link)?.contains("is a symbolic link") == true)
    }

    @Test func otherDirectoriesMustNotBeWritableByOthers() {
        let temp = TempDirectory()
        let mine = temp.path + "/not-the-private-one"
        let system = temp.directory("system", owner: Self.nobody, mode: 0o755)
        #expect(SocketDirectory.problem(socket: system + "/cached.sock", privateDirectory: mine) == nil)

        let open = temp.directory("open", owner: Self.nobody, mode: 0o777)
        #expect(SocketDirectory.problem(socket: open + "/cached.sock", privateDirectory: mine) ==
                "\(open) (owner nobody (uid 65534), mode 777) can be written by every user, who could replace the socket in it " +
                "(chmod go-w \(open), or give the daemon a socket in a directory only its owner can write)")
        let group = temp.directory("group", mode: 0o770)
        #expect(SocketDirectory.problem(socket: group + "/cached.sock", privateDirectory: mine)?.contains("mode 770) can be written by its group") == true)
        // Sticky and root's, like /tmp: nobody can replace a socket they do not own.
        let rootSticky = temp.directory("root-sticky", owner: 0, mode: 0o1777)
        #expect(SocketDirectory.problem(socket: rootSticky + "/cached.sock", privateDirectory: mine) == nil)
        #expect(SocketDirectory.problem(socket: "/tmp/cached.sock", privateDirectory: mine) == nil)
        // Sticky but another user's: they can replace anything in it.
        let userSticky = temp.directory("user-sticky", owner: Self.nobody, mode: 0o1777)
        #expect(SocketDirectory.problem(socket: userSticky + "/cached.sock", privateDirectory: mine)?.contains("mode 1777") == true)
        // A link to a directory is judged by the directory (/var/run -> /run).
        let link = temp.path + "/link"
        symlink(open, link)
        #expect(SocketDirectory.problem(socket: link + "/cached.sock", privateDirectory: mine)?.contains("mode 777") == true)
        // What does not exist is left to connect to report.
        #expect(SocketDirectory.problem(socket: temp.path + "/none/cached.sock", privateDirectory: mine) == nil)
    }

    @Test func theDefaultIsTheUsersTempDirectory() {
        #expect(DefaultPaths.privateTempDirectory == "/tmp/cached-\(getuid())")
    }
}

/// `Client` timeouts against sockets that listen and never answer.
@Suite struct ClientTimeoutTests {
    /// A listening socket nobody accepts on; closed and removed in `close`.
    private static func silentListener(_ path: String, backlog: Int32 = 16) throws -> FileDescriptor {
        try UnixSocket.listen(path: path, backlog: backlog)
    }

    @Test func noTimeoutByDefault() throws {
        let temp = TempDirectory()
        let listener = try Self.silentListener(temp.path + "/s.sock")
        defer { listener.close() }
        let client = try Client(socketPath: temp.path + "/s.sock")
        #expect(client.timeout == .none)
    }

    @Test(arguments: [ClientTimeout.answer(.seconds(0.3)), .whileAlive(.seconds(0.3))])
    func aSilentListenerTimesOut(_ timeout: ClientTimeout) throws {
        let temp = TempDirectory()
        let path = temp.path + "/s.sock"
        let listener = try Self.silentListener(path)
        defer { listener.close() }
        let client = try Client(socketPath: path, timeout: timeout)
        let start = Date()
        #expect {
            _ = try client.call("ping")
        } throws: { error in
            guard let e = error as? ClientError, case .timedOut(let socket, let seconds) = e else { return false }
            return socket == path && seconds == .seconds(0.3)
        }
        #expect(Date().timeIntervalSince(start) < 30)
    }

    @Test func aFullBacklogTimesOutInConnect() throws {
        let temp = TempDirectory()
        let path = temp.path + "/s.sock"
        let listener = try Self.silentListener(path, backlog: 0)
        defer { listener.close() }
        var queued: [Client] = []
        // Clients with a timeout, until one cannot connect.
        var failure: ClientError?
        while failure == nil && queued.count < 1000 {
            do { queued.append(try Client(socketPath: path, timeout: .answer(.seconds(0.2)))) } catch { failure = error }
        }
        #expect(!queued.isEmpty)
        guard case .timedOut(path, .seconds(0.2))? = failure else {
            Issue.record("expected a timeout in connect, got \(String(describing: failure))")
            return
        }
        #expect(failure?.description == "no answer from cached at \(path) within 0.2 s (is it stopped? check systemctl status cached)")
    }

    @Test func checkingTheDirectoryRefusesBeforeConnecting() throws {
        let temp = TempDirectory()
        let open = temp.directory("open", owner: 65534, mode: 0o777)
        let path = open + "/s.sock"
        let listener = try Self.silentListener(path)
        defer { listener.close() }
        #expect {
            _ = try Client(socketPath: path, checkingDirectory: true)
        } throws: { error in
            guard let e = error as? ClientError, case .untrustedDirectory(path, let reason) = e else { return false }
            return reason.contains("mode 777")
        }
        // Nothing was queued on the listener: no connection was made.
        #expect(try UnixSocket.accept(listener) == nil)
        // Not asked to check, it connects (the tests' own sockets).
        _ = try Client(socketPath: path)
        #expect(try UnixSocket.accept(listener) != nil)
    }
}

/// Owners in messages are named from /etc/passwd (cachectl is static: no NSS).
@Suite struct UserNameTests {
    @Test func namesComeFromThePasswdFileAndUnknownUIDsStayNumbers() throws {
        #expect(SocketDirectory.userName(0) == "root (uid 0)")
        let temp = TempDirectory()
        let file = temp.path + "/passwd"
        try "# comment\n\nbroken line\n:x:7:7::/:/bin/sh\nalice:x:1000:1000:Alice:/home/alice:/bin/bash\nbob:x:1001:1001::/home/bob:/bin/sh"
            .write(toFile: file, atomically: false, encoding: .utf8)
        #expect(SocketDirectory.userName(1000, passwd: file) == "alice (uid 1000)")
        #expect(SocketDirectory.userName(1001, passwd: file) == "bob (uid 1001)", "the last line has no newline")
        #expect(SocketDirectory.userName(7, passwd: file) == "uid 7", "an empty name is no name")
        #expect(SocketDirectory.userName(4242, passwd: file) == "uid 4242")
        #expect(SocketDirectory.userName(1000, passwd: temp.path + "/missing") == "uid 1000")
    }
}
