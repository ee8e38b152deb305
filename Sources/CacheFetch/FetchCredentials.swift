/// The configured request headers (`fetch-header`, `fetch-header-file`) and
/// the origins they may be sent to: those of posts-url and images-url.
///
/// `HTTPClient` adds them to each request, hop by hop: to a request whose
/// URL has one of these origins, and after a redirect only while the hop is
/// still on the origin the request began at (libcurl's rule for
/// `Authorization`, applied here to every configured header). An image on
/// another host never gets them, nor does a redirect target elsewhere.
public struct FetchCredentials: Sendable, Equatable, CustomStringConvertible {
    public var headers: [FetchHeader]
    public var origins: Set<URLOrigin>

    /// `headers` for the origins of `urls` (those that are http or https URLs).
    public init(headers: [FetchHeader] = [], originsOf urls: [String] = []) {
        self.headers = headers
        origins = Set(urls.compactMap(URLOrigin.init))
    }

    /// None: nothing is added to any request.
    public static let none = FetchCredentials()

    /// The headers for a hop to `origin` of a request that began at `first`.
    func headers(for origin: URLOrigin?, first: URLOrigin?) -> [FetchHeader] {
        guard let origin, origin == first, origins.contains(origin) else { return [] }
        return headers
    }

    /// True when headers are configured for `origin`.
    func apply(to origin: URLOrigin?) -> Bool {
        guard let origin else { return false }
        return !headers.isEmpty && origins.contains(origin)
    }

    /// The names and origins, never a value: `Authorization, X-Api-Key to
    /// http://a:80, https://b:443`, or `none`.
    public var description: String {
        guard !headers.isEmpty else { return "none" }
        let names = headers.map(\.name).joined(separator: ", ")
        let to = origins.map(\.description).sorted().joined(separator: ", ")
        return names + (to.isEmpty ? " (no posts-url or images-url: sent nowhere)" : " to " + to)
    }
}

/// What a request that was refused (401 or 403) carried, for the message.
public enum CredentialUse: Sendable, Equatable {
    /// No header is configured for the origin that answered.
    case noneConfigured(origin: String)
    /// These configured headers were sent, and refused.
    case sent(names: [String])
    /// Headers are configured for the origin the request began at, but a
    /// redirect led to `origin`, which is not sent them.
    case withheldAfterRedirect(origin: String)
}
