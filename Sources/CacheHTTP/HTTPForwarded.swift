/// What a proxy in front says of the client's connection: the scheme in
/// `Forwarded` (RFC 7239) and `X-Forwarded-Proto`. Each takes the last
/// element, the one the nearest proxy added; whether to believe it at all
/// is the front-end's setting (`http-trust-forwarded`).
extension HTTPRequest {
    /// The `proto` of `Forwarded`'s last element, unquoted; nil if it has none.
    public var lastForwardedProto: Substring? {
        guard let value = forwarded else { return nil }
        let last = value.split(separator: ",", omittingEmptySubsequences: false).last ?? ""
        for pair in last.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingSpaces.lowercased() == "proto" else { continue }
            var v = parts[1].trimmingSpaces
            if v.count >= 2 && v.first == "\"" && v.last == "\"" { v = v.dropFirst().dropLast() }
            return v
        }
        return nil
    }

    /// `X-Forwarded-Proto`'s last element; nil without the field.
    public var lastXForwardedProto: Substring? {
        forwardedProto.map { ($0.split(separator: ",", omittingEmptySubsequences: false).last ?? "").trimmingSpaces }
    }
}
