extension JSONParser {
    /// Removes insignificant whitespace from valid JSON text, keeping every
    /// other byte (key order, number spelling, escapes) as it was.
    public static func minify(_ text: some Collection<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.count)
        var inString = false
        var escaped = false
        for b in text {
            if inString {
                out.append(b)
                if escaped { escaped = false }
                else if b == UInt8(ascii: "\\") { escaped = true }
                else if b == UInt8(ascii: "\"") { inString = false }
            } else if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 {
                continue
            } else {
                if b == UInt8(ascii: "\"") { inString = true }
                out.append(b)
            }
        }
        return out
    }
}
