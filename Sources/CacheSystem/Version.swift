/// The version of cached and cachectl, reported by `ping`, `status`, both
/// programs' `--version` and the User-Agent (in CacheSystem, the one module
/// both programs link). The same as the top-level VERSION file: `make
/// check-version` (part of `make test`) fails when they differ.
public let cachedVersion = "0.1.0"
