import CacheHTTP
import CacheService
import CacheSystem

/// `/images/{row}?w=W&h=H&fit=F&format=F`: a variant of the row's image
/// (docs/http.md, "Image variants"), answered as its object is: verified,
/// with its hash as ETag, conditionals and ranges (`imageBody`).
extension HTTPFrontEnd {
    /// The variant the query asks for; nil when it names none of `w`, `h`,
    /// `fit`, `format`.
    static func variantRequest(_ request: HTTPRequest) throws(CacheError) -> VariantRequest? {
        let w = request.query("w"), h = request.query("h"), fit = request.query("fit"), format = request.query("format")
        guard w != nil || h != nil || fit != nil || format != nil else { return nil }
        // `w=32&w=64` asks for two things: refused, not read as the last.
        for name in ["w", "h", "fit", "format"] where request.query.lazy.filter({ $0.name == name }).count > 1 {
            throw .invalid("\(name) is given more than once")
        }
        func side(_ name: String, _ text: String?) throws(CacheError) -> Int? {
            guard let text else { return nil }
            guard let v = integer(text), v >= 1, v <= 65535 else { throw .invalid("\(name) is a decimal integer from 1 to 65535") }
            return Int(v)
        }
        var r = VariantRequest(width: try side("w", w), height: try side("h", h))
        if let fit {
            guard let f = VariantFit(name: fit) else { throw .invalid("fit is contain or cover") }
            r.fit = f
        }
        if let format {
            guard let f = VariantFormat(name: format) else { throw .invalid("format is one of jpeg, png, webp, avif") }
            r.format = f
        }
        return r
    }
}
