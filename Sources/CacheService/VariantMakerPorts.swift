import CacheStore
import CacheSystem
import CacheVariant

/// What making a variant needs of the store (`Store` is one).
protocol VariantStore: Sendable {
    /// The stored variant `spec` of `source`, if there is one.
    func variant(of source: Hash128, _ spec: VariantSpec) -> VariantRef?
    /// Whether the object's file is there with its size (one `fstatat`).
    func objectFileLooksRight(_ ref: ObjectRef) -> Bool
    /// Stores a variant's bytes durably.
    func commitVariant(_ bytes: [UInt8], of source: Hash128, _ spec: VariantSpec, width: Int, height: Int,
                       maxSize: Int64) throws(StoreError) -> VariantRef
    /// Throws when the file system has less than `minimum` bytes free.
    func checkHeadroom(_ minimum: Int64, needed: Int64) throws(StoreError)
    /// The original, opened and verified, with its size.
    func openVerifiedOriginal(_ hash: Hash128) throws(StoreError) -> (FileDescriptor, Int64)
    func objectPath(_ hash: Hash128) -> String
}

extension Store: VariantStore {
    func openVerifiedOriginal(_ hash: Hash128) throws(StoreError) -> (FileDescriptor, Int64) { try openVerified(hash) }
}

/// Who runs a variant's job (`VariantHelpers`, the pool of sandboxed helpers).
protocol VariantJobRunner: Sendable {
    func submit(_ job: VariantJob, _ completion: @escaping @Sendable (Result<MadeVariant, VariantFailure>) -> Void)
    /// Applies a reloaded `variant-timeout` and `variant-memory`.
    func apply(jobTimeout: Duration, memory: Int64)
    /// Refuses new jobs and ends the helpers.
    func stop()
}

extension VariantHelpers: VariantJobRunner {}
