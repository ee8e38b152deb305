import CacheFetch

extension CacheService {
    /// The configured request headers and the origins they go to, from a
    /// reload: requests that start after it carry them (docs/operations.md,
    /// "Credentials"). The service never sees them otherwise: the HTTP
    /// client adds them per request by the URL's origin.
    public func apply(_ credentials: FetchCredentials) {
        http.credentials = credentials
    }
}
