import CacheSystem

/// The posts a refresh gives, as `PostsPlan` reads them: each id once, at
/// its first place, with the bytes it was last given (`Store.replacePosts`'s
/// rule; the refresh itself keeps a repeated id's first element whole,
/// docs/protocol.md, "Feeds"). Found by id through a
/// `SlotIndex` of positions, not a dictionary of ids to bytes: at a million
/// posts 24 MB against some 90 MB of `[PostID: [UInt8]]` and its order,
/// held while the refresh's records are built (issue 34).
struct GivenPosts {
    private let posts: [(id: PostID, json: [UInt8])]
    /// Where each id is first given, in order.
    private var first: [Int32] = []
    /// Where the bytes of each id of `first` were last given.
    private var last: [Int32] = []
    /// Positions in `first` by id (hashed by `PostID.hashValue`, seeded per process).
    private var index = SlotIndex()

    init(_ posts: [(id: PostID, json: [UInt8])]) {
        // A post is at most a part of a feed document; far fewer than 2^31 of them.
        precondition(posts.count < Int(Int32.max), "more than 2^31 posts")
        self.posts = posts
        first.reserveCapacity(posts.count)
        index.reserve(posts.count)
        for i in posts.indices {
            let id = posts[i].id
            let hash = id.hashValue
            if let p = index.find(hash: hash, where: { posts[Int(first[Int($0)])].id == id }) {
                if last.isEmpty { last = first }
                last[Int(p)] = Int32(i)
                continue
            }
            index.insert(Int32(first.count), hash: hash)
            first.append(Int32(i))
            if !last.isEmpty { last.append(Int32(i)) }
        }
    }

    /// How many distinct ids.
    var count: Int { first.count }

    /// The id at position `p` (in `0..<count`), in the order first given.
    func id(_ p: Int) -> PostID { posts[Int(first[p])].id }

    /// The bytes last given for the id at position `p`.
    func json(_ p: Int) -> [UInt8] { posts[Int(last.isEmpty ? first[p] : last[p])].json }

    /// The position of `id`; nil when it is not given.
    func position(of id: PostID) -> Int? {
        index.find(hash: id.hashValue) { posts[Int(first[Int($0)])].id == id }.map(Int.init)
    }

    /// The bytes last given for `id`; nil when it is not given.
    func json(of id: PostID) -> [UInt8]? { position(of: id).map(json) }

    /// The ids in the order first given.
    var ids: LazyMapSequence<Range<Int>, PostID> { (0..<count).lazy.map(id) }
}
