/// The one rule for how a setting's name is spelled outside the
/// configuration file (docs/operations.md, "Configuration").
public enum SettingName {
    /// `posts-url` → `CACHED_POSTS_URL`.
    public static func environment(_ key: String) -> String {
        "CACHED_" + key.uppercased().replacing("-", with: "_")
    }

    /// `posts-url` → `--posts-url`, the daemon's flag.
    public static func flag(_ key: String) -> String {
        "--" + key
    }
}
