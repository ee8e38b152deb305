import Foundation
import Dispatch
import Testing
@testable import CacheStore
import CacheSystem

/// A feed of one page of unknown URL with these validators: what a
/// version-1 store holds of a feed, and what needs no version 2.
func onePage(_ validators: Validators = Validators(), count: Int) -> [FeedPage] {
    [FeedPage(url: "", validators: validators, next: nil, count: count)]
}

/// The shapes of a version-1 store's refreshes, for the tests about
/// something else (files, trust, compaction): integer ids, one page.
extension Store {
    /// `replacePosts` of integer ids as one page of unknown URL (`onePage`).
    func replacePosts(_ posts: [(id: Int64, json: [UInt8])], validators: Validators) throws(StoreError) -> PostsChange {
        try replacePosts(posts.map { (PostID.int($0.id), $0.json) }, pages: onePage(validators, count: posts.count))
    }

    /// `replaceManifest` as one page of unknown URL (`onePage`).
    @discardableResult
    func replaceManifest(_ rows: [(url: String, description: String?)], validators: Validators) throws(StoreError) -> Int {
        try replaceManifest(rows, pages: onePage(validators, count: rows.count))
    }

    /// The first page's validators (a version-1 store's feed validators).
    func validators(for feed: Feed) -> Validators {
        (feed == .posts ? postPages : manifestPages).first?.validators ?? Validators()
    }

    /// Post `id`, an integer id.
}

/// A table of posts written as a dictionary, for tests.
extension PostTable: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (PostID, [UInt8])...) {
        self.init()
        for (id, json) in elements { set(id, json) }
    }
}

/// An object writer of `store` holding `bytes`, ready to commit.
func objectWriter(holding bytes: [UInt8], in store: Store) throws -> ObjectWriter {
    let w = try store.newObjectWriter(maxSize: 1 << 20)
    try bytes.withUnsafeBytes { try w.append($0) }
    return w
}

/// Commits `writers[i]` to row i (URL "i.png") each on a thread of its own
/// while the log is held, as a slow fsync holds it, so that every commit
/// queues before the first is logged; returns the commits' failures once
/// all returned.
func commitQueuedTogether(_ writers: [ObjectWriter], in store: Store) throws -> [String] {
    let failures = Locked<[String]>([])
    let finished = DispatchGroup()
    store.writerForTests.withLock { _ in
        for (i, w) in writers.enumerated() {
            finished.enter()
            Thread {
                do { _ = try store.commitObject(w, rows: [(i, "\(i).png")]) } catch {
                    failures.withLock { $0.append("\(i): \(error)") }
                }
                finished.leave()
            }.start()
        }
        // Everyone is queued: one leader waits for the log, the others for it.
        while store.queuedCommitsForTests < writers.count { usleep(1000) }
    }
    // Not a time limit on the work: a bound on a hang (a lost wakeup waits for ever).
    try #require(finished.wait(timeout: .now() + 120) == .success, "every commit returned")
    return failures.withLock { $0 }
}
