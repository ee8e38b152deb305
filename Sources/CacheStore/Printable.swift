/// The one escaper for text from outside (file names, bytes an origin sent)
/// that goes into a log line or an error.
enum Printable {
    /// Printable ASCII as is, every other byte and the backslash itself as
    /// `\xHH`, so what is shown can neither split nor forge a line and reads
    /// back unambiguously; at most `limit` bytes shown, then `...`.
    static func escaped(_ bytes: [UInt8], limit: Int = Int.max) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out = ""
        for b in bytes.prefix(limit) {
            if b >= 0x20 && b < 0x7F && b != UInt8(ascii: "\\") {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "\\x" + String(decoding: [hex[Int(b >> 4)], hex[Int(b & 15)]], as: UTF8.self)
            }
        }
        return bytes.count > limit ? out + "..." : out
    }
}
