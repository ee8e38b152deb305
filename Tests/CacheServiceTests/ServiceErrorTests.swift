import TestSupport
import Testing
import Glibc
import Foundation
@testable import CacheService
import CacheStore
import CacheSystem

/// Errors are typed by what failed, and only the origin's are counted as upstream errors.
@Suite struct ServiceErrorTests {
    @Test func unconfiguredFeedsAreNotConfigured() async throws {
        let h = try Harness(origin: nil, feeds: Harness.feeds(nil))
        defer { h.close() }
        let s = h.service

        let posts = await completion { s.prefetch(.posts, force: false, progress: { _ in }, then: $0) }
        guard case .failure(.notConfigured(setting: "posts-url")) = posts else { Issue.record("posts: \(posts)"); return }

        let image = await answer { s.image(row: 0, fetch: true, then: $0) }
        #expect(!image.isNow)
        guard case .failure(.notConfigured(setting: "images-url")) = image.result else { Issue.record("image: \(image.result)"); return }

        let images = await answer { s.images(offset: 0, limit: nil, then: $0) }
        guard case .failure(.notConfigured(setting: "images-url")) = images.result else { Issue.record("images: \(images.result)"); return }

        let all = await completion { s.prefetch(.all, force: false, progress: { _ in }, then: $0) }
        guard case .failure(.several(let both)) = all else { Issue.record("all: \(all)"); return }
        #expect(both.count == 2)
        #expect(s.status().counters.upstreamErrors == 0, "a missing setting is not the origin's fault")
    }

    /// A row without a URL has no image (not found); one whose URL may not
    /// be fetched is the manifest's fault (upstream); each said in words, and
    /// no request is made or counted for either.
    @Test func unfetchableRowsSayWhyAndAreNotCounted() async throws {
        let manifest = Array(#"[{"url": ""}, {"url": "ftp://example.test/a.png"}]"#.utf8)
        let h = try await Harness.start(extra: ["images/manifest.json": manifest])
        defer { h.close() }
        let s = h.service
        let empty = await answer { s.image(row: 0, fetch: true, then: $0) }
        guard case .failure(let e0) = empty.result, case .notFound = e0 else { Issue.record("row 0: \(empty.result)"); return }
        #expect(e0.description.hasPrefix("row 0 has no image: the manifest gives it no url"), "\(e0)")
        // Not fetching changes nothing: it has no image, cached or not.
        let unfetched = await answer { s.image(row: 0, fetch: false, then: $0) }
        guard case .failure(.notFound) = unfetched.result else { Issue.record("row 0 without fetching: \(unfetched.result)"); return }
        let ftp = await answer { s.image(row: 1, fetch: true, then: $0) }
        guard case .failure(let e1) = ftp.result, case .origin = e1 else { Issue.record("row 1: \(ftp.result)"); return }
        #expect(e1.description == "row 1: refusing to fetch ftp://example.test/a.png: only http and https URLs are fetched")
        #expect(s.status().counters.upstreamErrors == 0)
        #expect(s.status().counters.misses == 1, "the ftp row's request is a miss; the row without a URL none")
        #expect(try h.origin!.requests().map(\.path) == ["/images/manifest.json"])
    }

    /// docs: with `.later` the completion runs "on a worker or fetch thread",
    /// never on the caller's thread inside the call. (Comparing a flag set
    /// after the call returns raced with a worker that ran first: the thread
    /// that runs the completion is what the contract is about.)
    @Test func aLaterCompletionNeverRunsOnTheCallersThread() async throws {
        let h = try Harness(origin: nil, feeds: Harness.feeds(nil))
        defer { h.close() }
        let s = h.service
        let caller = pthread_self()
        let insideCall = Locked(true)
        let ranOnCaller = Locked<Bool?>(nil)
        let outcome = s.images(offset: 0, limit: nil) { _ in
            let sameThread = pthread_equal(pthread_self(), caller) != 0
            let during = insideCall.withLock { $0 }
            ranOnCaller.withLock { $0 = sameThread && during }
        }
        insideCall.withLock { $0 = false }
        guard case .later = outcome else { Issue.record("images without images-url answered now"); return }
        for _ in 0..<500 where ranOnCaller.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(ranOnCaller.withLock { $0 } == false, "the completion ran on the caller's thread before .later was returned")
    }

    @Test func anOriginErrorStatusIsTheOriginsWithStatusAndURL() async throws {
        let h = try await Harness.start(feeds: { Harness.feeds($0, posts: "/fault/status/404/posts.json", images: "/fault/status/404/manifest.json") })
        defer { h.close() }
        let s = h.service
        let postsURL = h.url("/fault/status/404/posts.json")

        let posts = await completion { s.prefetch(.posts, force: false, progress: { _ in }, then: $0) }
        guard case .failure(.origin(let f)) = posts else { Issue.record("posts: \(posts)"); return }
        #expect(f.status == 404)
        #expect(f.url == postsURL)
        #expect(f.subject.contains("posts-url"), "\(f.subject)")
        #expect(f.description.contains("404"), "\(f.description)")
        #expect(s.status().counters.upstreamErrors == 1)
        if case .failure(.notFound(let what)) = s.post(id: 1) { #expect(what.contains("never fetched")) } else { Issue.record("post 1 found") }

        let image = await answer { s.image(row: 0, fetch: true, then: $0) }
        guard case .failure(.origin(let m)) = image.result else { Issue.record("image: \(image.result)"); return }
        #expect(m.status == 404)
        #expect(m.url == h.url("/fault/status/404/manifest.json"))
        #expect(s.status().counters.upstreamErrors == 2, "each failure counted once")
        let log = try await h.origin!.requests(atLeast: 2)
        #expect(log.map(\.status) == [404, 404], "a 404 is not retried")
    }

    @Test func anImageThatIsHTMLIsTheOriginsFault() async throws {
        let manifest = #"[{"url": "/fault/html/a.png", "description": "html"}, {"url": "01-sunrise.png"}]"#
        let h = try await Harness.start(extra: ["images/html.json": Array(manifest.utf8)],
                                        feeds: { Harness.feeds($0, images: "/images/html.json") })
        defer { h.close() }
        let s = h.service

        let image = await answer { s.image(row: 0, fetch: true, then: $0) }
        #expect(!image.isNow)
        guard case .failure(.origin(let f)) = image.result else { Issue.record("row 0: \(image.result)"); return }
        #expect(f.url == h.url("/fault/html/a.png"))
        #expect(f.reason.contains("not an image"), "\(f.reason)")
        #expect(f.status == nil, "the origin answered 200")
        #expect(f.subject.contains("row 0"), "\(f.subject)")
        #expect(s.status().counters.upstreamErrors == 1)
        #expect(s.status().objects == 0)
        #expect(s.status().counters.downloads == 0)

        let report = await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }
        let images = try #require(try report.get().images)
        #expect(images.downloaded == 1)
        #expect(images.failed == 1)
        #expect(images.failures.map(\.row) == [0])
        #expect(images.failures.first?.url == h.url("/fault/html/a.png"))
        #expect(images.failures.first?.error.contains("not an image") == true)
        #expect(s.status().counters.upstreamErrors == 2)
    }

    @Test func aStoreFailureIsTheStoresAndNotAnUpstreamError() async throws {
        let directory = try makeTempDirectory("svc-store")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let disk = directory + "/disk"
        let root = getuid() == 0
        if root {
            // Root ignores permissions: a real tiny tmpfs filled up instead.
            try #require(mkdir(disk, 0o700) == 0)
            let mounted = run("/bin/mount", ["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", disk])
            guard mounted.status == 0 else {
                print("cannot mount a tmpfs for the store-failure test: \(mounted.output)")
                Issue.record("cannot mount a tmpfs (\(mounted.output)): the store failure was not tested")
                return
            }
        }
        defer { if root { _ = run("/bin/umount", ["-l", disk]) } }

        let origin = try await ServiceOrigin.start()
        let h = try Harness(origin: origin, feeds: Harness.feeds(origin), storeDirectory: disk + "/store", directory: directory)
        defer { h.close(keepDirectory: true); origin.stop() }
        let s = h.service
        let tmp = h.storeDirectory + "/tmp"

        // The manifest is stored while there is room.
        let listed = await answer { s.images(offset: 0, limit: nil, then: $0) }
        #expect(try listed.result.get().total == 16)

        if root {
            fill(disk + "/filler")
        } else {
            try #require(chmod(tmp, 0o500) == 0)
        }
        let image = await answer { s.image(row: 2, fetch: true, then: $0) }
        if !root { _ = chmod(tmp, 0o700) }
        guard case .failure(let e) = image.result else { Issue.record("row 2 was stored on a full disk"); return }
        guard case .store = e else { Issue.record("row 2: not the store's failure: \(e)"); return }
        #expect(e.isStoreFailure)
        #expect("\(e)".contains("row 2"), "\(e)")
        if root { #expect("\(e)".contains("disk is full"), "\(e)") }
        #expect(s.status().counters.upstreamErrors == 0, "a store failure is never the origin's")
        #expect(s.status().objects == 0)

        // And in a prefetch, the rows fail with the store's reason, still not counted.
        let report = await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }
        if !root { _ = chmod(tmp, 0o700) }
        if let images = try? report.get().images {
            #expect(images.downloaded == 0)
            #expect(images.failed == 16)
        } else if case .failure(let f) = report {
            #expect(f.isStoreFailure, "\(f)")
        }
        #expect(s.status().counters.upstreamErrors == 0)
    }

    /// Writes `path` until the file system has no room left.
    private func fill(_ path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { Issue.record("cannot create \(path): errno \(errno)"); return }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x55, count: 4096)
        for size in [4096, 512, 1] {
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, size) }) == size {}
        }
    }

    private func run(_ tool: String, _ args: [String]) -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        do { try p.run() } catch { return (-1, "cannot run \(tool): \(error)") }
        let out = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: out, as: UTF8.self))
    }
}
