import CacheSystem

/// Variants of stored images: objects like any other (hash-named, verified
/// on read, counted in `max-size`, evicted by last use), mapped from their
/// source object and spec by `variant` records (docs/storage-format.md).
extension Store {
    /// The stored variant `spec` of the object `source`, if there is one.
    public func variant(of source: Hash128, _ spec: VariantSpec) -> VariantRef? {
        state.withLock { $0.variants[VariantKey(source: source, spec: spec)] }
    }

    /// Makes `bytes`, the variant `spec` of `source` (`width` x `height`
    /// pixels), durable as an object, then logs its mapping grouped with the
    /// other commits waiting (`GroupCommit`). The bytes must be an image of
    /// the spec's format. When `source` was forgotten meanwhile nothing is
    /// logged (the file is gc's): the variant is returned all the same.
    public func commitVariant(_ bytes: [UInt8], of source: Hash128, _ spec: VariantSpec, width: Int, height: Int,
                              maxSize: Int64) throws(StoreError) -> VariantRef {
        let objectWriter = try newObjectWriter(maxSize: maxSize)
        do throws(StoreError) {
            try bytes.withBytes { (b) throws(StoreError) in try objectWriter.append(b) }
        } catch {
            objectWriter.discard()
            throw error
        }
        guard let type = objectWriter.imageType, type.rawValue == spec.format.rawValue else {
            let found = objectWriter.imageType.map { "\($0.mimeType)" } ?? "not an image"
            objectWriter.discard()
            throw .notAnImage("the variant helper's output is \(found), not \(spec.format.name)")
        }
        let ref = ObjectRef(hash: objectWriter.hash, size: objectWriter.size, type: type)
        let key = VariantKey(source: source, spec: spec)
        try placing(ref) { () throws(StoreError) in
            try placeObject(objectWriter, ref)
            try commitGroup.commit(ref, rows: [], chunks: objectWriter.chunkDigests, variant: (key, width, height)) { (batch) throws(StoreError) in
                try writer.withLock { (w) throws(StoreError) in try logCommits(batch, &w) }
            }
        }
        return VariantRef(object: ref, width: width, height: height)
    }
}
