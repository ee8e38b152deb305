import CacheSystem

/// Originals being tried: while a job for one variant of an original is
/// with the helpers, the other variants of it asked meanwhile wait for its
/// outcome instead of decoding the same original on other helpers
/// (docs/operations.md, "Image variants"). When it ends they go on: at once
/// with its remembered failure when it was the original's, to the helpers
/// otherwise, all together. In memory only; a waiter is a variant being
/// made, so there are no more than requests under way.
struct VariantTrials: Sendable {
    private var waiting: [Hash128: [@Sendable () -> Void]] = [:]

    /// Whether the caller's job tries `source` now (then it must call `end`);
    /// if not, `resume` runs once the job trying it ends.
    mutating func begin(_ source: Hash128, resume: @escaping @Sendable () -> Void) -> Bool {
        if waiting[source] != nil {
            waiting[source]?.append(resume)
            return false
        }
        waiting[source] = []
        return true
    }

    /// The job trying `source` ended: the variants that waited for it, to resume.
    mutating func end(_ source: Hash128) -> [@Sendable () -> Void] {
        waiting.removeValue(forKey: source) ?? []
    }
}
