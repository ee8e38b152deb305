/// The daemon's version, reported by `ping`, `status`, `--version` and the User-Agent.
public let cachedVersion = "0.1.0"
