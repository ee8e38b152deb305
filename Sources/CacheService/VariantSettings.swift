import CacheStore
import CacheSystem

/// What a client may ask of variants (`variant-max-dimension`,
/// `variant-sizes`, `max-image-pixels`), and how long a failure is
/// remembered (`variant-retry-after`): a reload changes them.
public struct VariantSettings: Sendable, Equatable {
    /// The largest width or height asked for, and the bound of a side a
    /// request leaves free.
    public var maxDimension = 2048
    /// The widths and heights a request may ask for; empty: any up to `maxDimension`.
    public var sizes: [Int] = []
    /// An original of more pixels (its first frame) is refused by its header.
    public var maxPixels: Int64 = 100_000_000
    /// An original a helper failed on is tried again after this long,
    /// doubled with each failure of it again (`variant-retry-after`;
    /// VariantRefusals.swift).
    public var retryAfter = Duration.seconds(60)

    public init() {}

    /// Whether a stored variant is within these settings' bound (one made
    /// under a larger `variant-max-dimension` for a free side is made again).
    public func admits(_ v: VariantRef) -> Bool { v.width <= maxDimension && v.height <= maxDimension }

    /// The most bytes a variant of `spec` can take: four bytes a pixel of
    /// its box (an uncompressible RGBA PNG), and 1 MiB of headers. More from
    /// a helper is a helper gone wrong.
    public func largestResult(_ spec: VariantSpec) -> Int64 {
        Int64(spec.width ?? maxDimension) * Int64(spec.height ?? maxDimension) * 4 + (1 << 20)
    }

    /// The spec a request resolves to for an original whose `ImageType`
    /// code is `originalCode`, or why it is refused (docs/protocol.md,
    /// "Image variants").
    public func resolve(_ r: VariantRequest, originalCode: UInt8) -> Result<VariantSpec, CacheError> {
        if let refusal = refusal(of: r.width, named: "width") ?? refusal(of: r.height, named: "height") { return .failure(refusal) }
        return .success(VariantSpec(width: r.width, height: r.height, fit: r.fit ?? .contain,
                                    format: r.format ?? VariantFormat.defaultFor(originalCode: originalCode)))
    }

    /// Why side `name` of `value` pixels may not be asked for; nil when it
    /// may (or is not given). Called on every variant hit: no allocation
    /// unless it refuses.
    private func refusal(of value: Int?, named name: String) -> CacheError? {
        guard let v = value else { return nil }
        guard v >= 1, v <= maxDimension else {
            return .invalid("variant \(name) \(v) is out of range: 1 to \(maxDimension) (variant-max-dimension)")
        }
        guard sizes.isEmpty || sizes.contains(v) else {
            let allowed = sizes.map(String.init).joined(separator: ", ")
            return .invalid("variant \(name) \(v) is not an allowed size (variant-sizes: \(allowed))")
        }
        return nil
    }
}

/// A stored variant, as front-ends answer it.
public struct VariantInfo: Sendable, Equatable {
    /// The variant's object (hash, size, type, path): `read` and `open` take its hash.
    public var object: ObjectInfo
    public var width: Int
    public var height: Int
}
