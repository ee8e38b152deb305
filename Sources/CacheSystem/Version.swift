/// The version of cached and cachectl, reported by `ping`, `status`, both
/// programs' `--version` and the User-Agent (in CacheSystem, the one module
/// both programs link).
public let cachedVersion = "0.1.0"
