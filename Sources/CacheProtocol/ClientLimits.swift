/// What a client accepts from the daemon, derived from the protocol's limits
/// (docs/protocol.md, "Client libraries"): past them an answer is
/// `malformed`, so a daemon (or whoever took its socket) that misbehaves
/// cannot make a client allocate without bound. The Python client uses the
/// same figures.
public enum ProtocolLimits {
    /// The longest answer line read, without its `\n`: the largest feed the
    /// daemon accepts by default (`max-object-size`, 64 MiB), listed whole by
    /// `list_posts` or one post of it by `get_post`, plus a `tag` as long as
    /// a request line may be.
    public static let maxAnswerLine = (64 << 20) + maxRequestLine

    /// The deepest nesting read in an answer. Feeds are parsed at most 64
    /// levels deep, so a post holds at most 63; `list_posts` puts it two
    /// levels down. Twice the default leaves room for a tag as deep as a
    /// request of the default `max-json-depth`.
    public static let maxAnswerDepth = 2 * JSONParser.defaultMaxDepth

    /// The largest `read` payload taken into memory (objects are at most
    /// `max-object-size`, 64 MiB by default): a larger declared size is
    /// refused before a byte of it is read. `open` passes a descriptor
    /// instead, for any size.
    public static let maxReadBytes: Int64 = 1 << 30

    /// The most descriptors held before their `open` answers are read: one
    /// per successful `open`, and a connection has at most 256 requests
    /// unanswered (docs/protocol.md, "Limits"). The rest are closed.
    public static let maxPendingDescriptors = 256
}
