import CacheProtocol
import CacheStore
import CacheSystem

/// Each feed's stored walk: the digest of the settings its pages were
/// walked with and its last page's "has more" warning (docs/protocol.md,
/// "Never a silent first page"), as `feeds.state` holds them.
struct FeedWarnings: Sendable {
    var state = FeedsState()
}

extension FeedRefresher {
    /// The digest of the settings that decide what a feed's stored pages
    /// hold and name as next: its URL, where its items are, how it pages,
    /// which members are read. A refresh under another digest asks every
    /// page without validators (`FeedsState`).
    static func settingsDigest(_ feed: Feed, _ c: FeedConfiguration, credentials: String) -> Hash128 {
        let shape = feed == .posts ? c.postsShape : c.imagesShape
        var parts = [feed == .posts ? "posts" : "manifest", (feed == .posts ? c.postsURL : c.imagesURL) ?? "-",
                     shape.items?.description ?? "-", shape.next?.description ?? "-", shape.item?.description ?? "-", shape.paging.canonical]
        parts += feed == .posts ? [c.fields.postID.description, c.postsKeep.name] : [c.fields.imageURL.description, c.fields.imageDescription.description]
        parts.append(credentials)
        return Hash128(of: Array(parts.joined(separator: "\n").utf8))
    }

    /// The digest of `feed`'s settings now: the configuration's, and the
    /// names (never the values) of the headers configured for the feeds'
    /// origins, which change what an origin answers.
    func settingsDigest(_ feed: Feed, _ c: FeedConfiguration) -> Hash128 {
        Self.settingsDigest(feed, c, credentials: credentials())
    }

    /// True when `feed`'s stored pages were walked under other settings than
    /// `digest` (or under settings not recorded: a store from before they
    /// were): the refresh then asks every page without validators.
    func settingsChanged(_ feed: Feed, _ digest: Hash128) -> Bool {
        let known = feed == .posts ? store.postsKnown : store.manifestKnown
        guard known else { return false }
        let changed = warnings.withLock { $0.state.entries[feed].map { $0.settings != digest } ?? true }
        if changed {
            log.info("\(feed == .posts ? "posts" : "manifest") settings differ from those its stored pages were walked with: every page is asked without validators")
        }
        return changed
    }

    /// Loads `feeds.state` at start; a damaged one is said and replaced at the next refresh.
    func loadFeedsState() {
        switch store.readFeedsState() {
        case .absent: break
        case .found(let state): warnings.withLock { $0.state = state }
        case .damaged(let why): log.warning("\(why): taken as absent, so each feed's next refresh asks every page without validators")
        }
    }

    /// Records what a walk under settings `digest` found on its last page:
    /// a new warning, none, or (a 304) the one before standing; writes
    /// `feeds.state` when that changed. A standing warning is logged at every refresh.
    func noteWarning(_ feed: Feed, _ warning: WalkWarning, settings digest: Hash128) {
        // One writer at a time, so the file never goes back to an older state.
        feedsStateWrites.withLock { _ in
            let (standing, changed): (String?, FeedsState?) = warnings.withLock { w in
                let before = w.state
                var entry = w.state.entries[feed] ?? FeedsState.Entry(settings: digest)
                entry.settings = digest
                switch warning {
                case .none: entry.warning = nil
                case .more: entry.warning = warning.text(feed: feed == .posts ? "posts" : "images").map(FeedsState.clean)
                case .asBefore: break
                }
                w.state.entries[feed] = entry
                return (entry.warning, w.state == before ? nil : w.state)
            }
            if let standing { log.warning("\(standing) (the refresh kept what it read)") }
            guard let changed else { return }
            do throws(StoreError) { try store.writeFeedsState(changed) } catch {
                log.warning("could not write feeds.state (\(error)): after a restart each feed's next refresh asks every page without validators")
            }
        }
    }

    /// The warning standing for `feed`, as a list (empty or one): none when
    /// the settings changed since it was found (they may be what it asked for).
    func currentWarnings(_ feed: Feed) -> [String] {
        let digest = settingsDigest(feed, settings())
        return warnings.withLock { w in w.state.entries[feed].flatMap { $0.settings == digest ? $0.warning : nil } }.map { [$0] } ?? []
    }

    /// The standing warnings of the feeds asked for: the posts' first, then the manifest's.
    func feedWarnings(posts: Bool = true, images: Bool = true) -> [String] {
        (posts ? currentWarnings(.posts) : []) + (images ? currentWarnings(.manifest) : [])
    }
}
