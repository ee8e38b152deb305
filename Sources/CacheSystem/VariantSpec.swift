/// How a variant fills the box its width and height make
/// (docs/protocol.md, "Image variants").
public enum VariantFit: UInt8, Sendable, CaseIterable {
    /// The whole image, scaled to fit inside the box (its aspect kept).
    case contain = 1
    /// The box filled exactly, the image scaled to cover it and its middle kept.
    case cover = 2

    /// The name a request gives: `contain`, `cover`.
    public var name: String {
        switch self {
        case .contain: "contain"
        case .cover: "cover"
        }
    }

    public init?(name: String) {
        guard let f = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = f
    }
}

/// The formats a variant is written in. The raw values are the store's
/// `ImageType` codes for the same formats, in the log and on the wire to
/// the helper.
public enum VariantFormat: UInt8, Sendable, CaseIterable {
    case jpeg = 1, png = 2, webp = 4, avif = 6

    /// The name a request gives: `jpeg`, `png`, `webp`, `avif`.
    public var name: String {
        switch self {
        case .jpeg: "jpeg"
        case .png: "png"
        case .webp: "webp"
        case .avif: "avif"
        }
    }

    public init?(name: String) {
        guard let f = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = f
    }

    /// The variant format for an original whose `ImageType` code is `code`:
    /// the same format when it is one of these, else webp (the default of
    /// a request that names none).
    public static func defaultFor(originalCode code: UInt8) -> VariantFormat {
        VariantFormat(rawValue: code) ?? .webp
    }
}

/// One variant of an image, as resolved for the store: its box (a missing
/// side is free, bounded by `variant-max-dimension`), how the image fills
/// it, and its format. Two requests with the same resolved spec of the same
/// original share one variant.
public struct VariantSpec: Sendable, Hashable, CustomStringConvertible {
    /// The box's width in pixels; nil: any width the height allows.
    public var width: Int?
    /// The box's height in pixels; nil: any height the width allows.
    public var height: Int?
    public var fit: VariantFit
    public var format: VariantFormat

    /// The spec as asked. `cover` with one side missing has nothing to
    /// crop and is `contain` (one spec, so one variant, for both).
    public init(width: Int?, height: Int?, fit: VariantFit, format: VariantFormat) {
        self.width = width
        self.height = height
        self.fit = width == nil || height == nil ? .contain : fit
        self.format = format
    }

    /// `w=96,h=-,contain,webp`: how logs and messages name a spec.
    public var description: String {
        "w=\(width.map(String.init) ?? "-"),h=\(height.map(String.init) ?? "-"),\(fit.name),\(format.name)"
    }
}

/// A variant as a client asks for it: any of its parts may be missing.
public struct VariantRequest: Sendable, Equatable {
    public var width: Int?
    public var height: Int?
    /// Default `contain`.
    public var fit: VariantFit?
    /// Default: the original's format when it is jpeg, png, webp or avif, else webp.
    public var format: VariantFormat?

    public init(width: Int? = nil, height: Int? = nil, fit: VariantFit? = nil, format: VariantFormat? = nil) {
        self.width = width
        self.height = height
        self.fit = fit
        self.format = format
    }
}
