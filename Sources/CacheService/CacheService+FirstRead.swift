/// The first read of a feed never fetched fetches it, once: `list_posts`
/// (`GET /posts`) as `list_images` (`GET /images`) and `get_image` always
/// did for the manifest (docs/protocol.md, "list_posts").
extension CacheService {
    /// Calls `completion` once the posts are known (a refresh has stored
    /// them at least once), fetching them if they never were. Concurrent
    /// first reads and a prefetch share one refresh.
    func ensurePosts(_ completion: @escaping @Sendable (Result<Void, CacheError>) -> Void) {
        if store.postsKnown { completion(.success(())); return }
        refreshPosts(force: false) { result in completion(result.map { _ in () }) }
    }
}
