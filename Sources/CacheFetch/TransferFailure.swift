import CCurl

/// Turns libcurl's wording of a failed transfer into a message that says
/// what went wrong and, where a setting fixes it, which one.
enum TransferFailure {
    static func explain(code: CURLcode, message: String, policy: FetchPolicy) -> String {
        switch code {
        case CURLE_PEER_FAILED_VERIFICATION:
            return certificate(message, policy: policy)
        case CURLE_SSL_CACERT_BADFILE:
            let source = [policy.caFile.map { "ca-file \($0)" }, policy.caPath.map { "ca-path \($0)" }]
                .compactMap { $0 }.joined(separator: " or ")
            return "TLS: could not load the trusted CA certificates" + (source.isEmpty ? "" : " from \(source)") +
                " (\(message)); check that the file is a readable PEM file"
        case CURLE_COULDNT_RESOLVE_PROXY:
            return "\(message) (check the proxy setting or the https_proxy, http_proxy and all_proxy variables)"
        default:
            return message
        }
    }

    /// An error status in words: `HTTP 404`; a 401 or 403 also says whether
    /// the configured fetch-header credentials were sent, and if not, why.
    static func status(_ code: Int, credentials: CredentialUse?) -> String {
        let head = "HTTP \(code)"
        let named = code == 401 ? head + " Unauthorized" : code == 403 ? head + " Forbidden" : head
        switch credentials {
        case nil: return named
        case .noneConfigured(let origin):
            return "\(named): no fetch-header is configured for this origin (\(origin))"
        case .sent(let names):
            return "\(named): the origin refused the configured fetch-header credentials (\(names.joined(separator: ", ")))"
        case .withheldAfterRedirect(let origin):
            return "\(named) from \(origin), where a redirect led: fetch-header credentials are never sent after a redirect to another origin"
        }
    }

    /// The server's certificate was refused: say why and what fixes it.
    private static func certificate(_ message: String, policy: FetchPolicy) -> String {
        let lower = message.lowercased()
        if lower.contains("subject name") || lower.contains("does not match") {
            return "TLS certificate problem: the certificate is not valid for this host name (\(message)); " +
                "use the name it was issued for in the URL"
        }
        if lower.contains("expired") || lower.contains("not yet valid") {
            return "TLS certificate problem: \(message); the server's certificate must be renewed"
        }
        let trusted = policy.caFile != nil || policy.caPath != nil
            ? "the configured ca-file/ca-path does not include the CA that signed it"
            : "if the server uses a private CA, trust it with the ca-file setting (a PEM file) or ca-path (a hashed directory)"
        return "TLS certificate problem: \(message); \(trusted)"
    }
}
