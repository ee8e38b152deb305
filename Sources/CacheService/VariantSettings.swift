import CacheSystem

/// What a client may ask of variants (`variant-max-dimension`,
/// `variant-sizes`, `max-image-pixels`): a reload changes them.
public struct VariantSettings: Sendable, Equatable {
    /// The largest width or height asked for, and the bound of a side a
    /// request leaves free.
    public var maxDimension = 2048
    /// The widths and heights a request may ask for; empty: any up to `maxDimension`.
    public var sizes: [Int] = []
    /// An original of more pixels (its first frame) is refused by its header.
    public var maxPixels: Int64 = 100_000_000

    public init() {}

    /// The spec a request resolves to for an original whose `ImageType`
    /// code is `originalCode`, or why it is refused (docs/protocol.md,
    /// "Image variants").
    public func resolve(_ r: VariantRequest, originalCode: UInt8) -> Result<VariantSpec, CacheError> {
        for (name, value) in [("width", r.width), ("height", r.height)] {
            guard let v = value else { continue }
            guard v >= 1, v <= maxDimension else {
                return .failure(.invalid("variant \(name) \(v) is out of range: 1 to \(maxDimension) (variant-max-dimension)"))
            }
            guard sizes.isEmpty || sizes.contains(v) else {
                let allowed = sizes.map(String.init).joined(separator: ", ")
                return .failure(.invalid("variant \(name) \(v) is not an allowed size (variant-sizes: \(allowed))"))
            }
        }
        return .success(VariantSpec(width: r.width, height: r.height, fit: r.fit ?? .contain,
                                    format: r.format ?? VariantFormat.defaultFor(originalCode: originalCode)))
    }
}

/// A stored variant, as front-ends answer it.
public struct VariantInfo: Sendable, Equatable {
    /// The variant's object (hash, size, type, path): `read` and `open` take its hash.
    public var object: ObjectInfo
    public var width: Int
    public var height: Int
}
