/// The image formats the store accepts, recognised by their first bytes.
///
/// An HTML error page served with status 200 has no image signature and is
/// rejected: only bytes that start like an image are ever stored.
public enum ImageType: UInt8, Sendable, CaseIterable {
    case jpeg = 1, png = 2, gif = 3, webp = 4, bmp = 5, avif = 6

    /// How many leading bytes `detect` needs at most.
    public static let signatureLength = 16

    /// The MIME type served to clients.
    public var mimeType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .gif: "image/gif"
        case .webp: "image/webp"
        case .bmp: "image/bmp"
        case .avif: "image/avif"
        }
    }

    /// The type whose signature `head` starts with, or nil.
    public static func detect(_ head: some Collection<UInt8>) -> ImageType? {
        let b = Array(head.prefix(signatureLength))
        func starts(_ sig: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + sig.count && Array(b[offset..<offset + sig.count]) == sig
        }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return .gif }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return .webp }
        if starts(Array("BM".utf8)) && b.count >= 14 { return .bmp }
        if starts(Array("ftypavif".utf8), at: 4) || starts(Array("ftypavis".utf8), at: 4) { return .avif }
        return nil
    }

    /// A short description of what non-image bytes look like, for error messages.
    public static func describeNonImage(_ head: some Collection<UInt8>) -> String {
        let text = String(decoding: head.prefix(16), as: UTF8.self).lowercased()
        if text.hasPrefix("<!doctype html") || text.hasPrefix("<html") { return "HTML" }
        if text.hasPrefix("{") || text.hasPrefix("[") { return "JSON" }
        if head.isEmpty { return "an empty body" }
        return "unknown bytes"
    }
}
