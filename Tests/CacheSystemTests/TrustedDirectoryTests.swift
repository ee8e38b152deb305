#if canImport(Glibc)
import Glibc
#endif
import Testing
import CacheSystem

@Suite struct TrustedDirectoryTests {
    @Test func aPrivateDirectoryOfOursIsFine() {
        let temp = TempDirectory()
        let dir = temp.makeDirectory("private", mode: 0o700)
        #expect(TrustedDirectory.problem(dir) == nil)
        #expect(TrustedDirectory.problem(temp.makeDirectory("readable", mode: 0o755)) == nil)
    }

    @Test func aDirectoryEveryoneCanWriteIsReported() throws {
        let temp = TempDirectory()
        let dir = temp.makeDirectory("open", mode: 0o777)
        let problem = try #require(TrustedDirectory.problem(dir))
        #expect(problem == "\(dir) can be written by every user (mode 777); another user could replace what is in it (chmod go-w \(dir))")
        // The sticky bit does not help unless asked for, and then only for root's directories.
        #expect(chmod(dir, 0o1777) == 0)
        #expect(TrustedDirectory.problem(dir)?.contains("(mode 1777)") == true)
        if geteuid() == 0 {
            #expect(TrustedDirectory.problem(dir, allowSticky: true) == nil)
        } else {
            #expect(TrustedDirectory.problem(dir, allowSticky: true)?.contains("every user") == true)
        }
    }

    @Test func aDirectoryItsGroupCanWriteIsReported() throws {
        let temp = TempDirectory()
        let dir = temp.makeDirectory("group", mode: 0o770)
        let problem = try #require(TrustedDirectory.problem(dir))
        #expect(problem.contains("can be written by its group (mode 770)"))
        #expect(problem.contains("chmod go-w \(dir)"))
    }

    @Test func aLinkIsReportedUnlessFollowed() throws {
        let temp = TempDirectory()
        let real = temp.makeDirectory("real", mode: 0o700)
        let link = temp.link("link", to: real)
        #expect(TrustedDirectory.problem(link) == "\(link) is a symbolic link; use the real directory it points to")
        #expect(TrustedDirectory.problem(link, followLink: true) == nil)
        #expect(chmod(real, 0o777) == 0)
        #expect(TrustedDirectory.problem(link, followLink: true)?.contains("every user") == true)
    }

    @Test func aFileOrAMissingPathIsReported() {
        let temp = TempDirectory()
        let file = temp.write("file", "x")
        #expect(TrustedDirectory.problem(file) == "\(file) is not a directory")
        let missing = temp.at("missing")
        #expect(TrustedDirectory.problem(missing) == "\(missing): No such file or directory")
    }

    @Test(.enabled(if: geteuid() == 0, "only root can give a directory to another user"))
    func aDirectoryOwnedByAnotherUserIsReported() throws {
        let temp = TempDirectory()
        let dir = temp.makeDirectory("theirs", mode: 0o700)
        try #require(chown(dir, 4242, 4242) == 0)
        let problem = try #require(TrustedDirectory.problem(dir))
        #expect(problem.hasPrefix("\(dir) is owned by uid 4242, not by uid 0 who runs this"))
        #expect(problem.contains("chown 0 \(dir)"))
    }

    @Test func ancestorsAreCheckedUpToTheRoot() throws {
        let temp = TempDirectory()
        temp.makeDirectory("a", mode: 0o700)
        temp.makeDirectory("a/b", mode: 0o700)
        let socket = temp.at("a/b/socket")
        // /tmp is root's and sticky; our mkdtemp directory is 0700.
        #expect(TrustedDirectory.ancestorsProblem(of: socket) == nil)
        #expect(chmod(temp.at("a"), 0o777) == 0)
        let problem = try #require(TrustedDirectory.ancestorsProblem(of: socket))
        #expect(problem.hasPrefix("\(temp.at("a")) can be written by every user"))
        // Only the ancestors: the path itself may be anything.
        #expect(chmod(temp.at("a"), 0o700) == 0)
        #expect(chmod(temp.at("a/b"), 0o777) == 0)
        #expect(TrustedDirectory.ancestorsProblem(of: temp.at("a/b")) == nil)
        #expect(TrustedDirectory.ancestorsProblem(of: socket)?.hasPrefix(temp.at("a/b") + " ") == true)
    }

    @Test func anAncestorLinkIsJudgedByItsTarget() throws {
        let temp = TempDirectory()
        let real = temp.makeDirectory("real", mode: 0o700)
        temp.link("alias", to: real)
        #expect(TrustedDirectory.ancestorsProblem(of: temp.at("alias/socket")) == nil)
        #expect(chmod(real, 0o777) == 0)
        #expect(TrustedDirectory.ancestorsProblem(of: temp.at("alias/socket"))?.contains("every user") == true)
    }

    /// The directories above a link's target are checked too: the target
    /// itself is ours, but its parent lets every user swap it (the hole the
    /// socket directory and the configuration file shared).
    @Test func theDirectoriesAboveALinksTargetAreChecked() throws {
        let temp = TempDirectory()
        temp.makeDirectory("open", mode: 0o700)
        let real = temp.makeDirectory("open/run", mode: 0o700)
        temp.link("alias", to: real)
        #expect(TrustedDirectory.ancestorsProblem(of: temp.at("alias/socket")) == nil)
        #expect(chmod(temp.at("open"), 0o777) == 0)
        let problem = try #require(TrustedDirectory.ancestorsProblem(of: temp.at("alias/socket")))
        #expect(problem.hasPrefix("\(temp.at("open")) can be written by every user"), "\(problem)")
        #expect(problem.hasSuffix(" (where \(temp.at("alias")) leads)"), "\(problem)")
    }
}
