import CacheSystem

/// One setting: its name, the kind of value it takes, its default, a
/// one-line doc and whether a reload (SIGHUP) changes it in the running
/// daemon. The table of these drives the flags, the `CACHED_*` names, the
/// configuration file, `--help`, the SIGHUP log line and the test that
/// docs/operations.md lists every setting.
struct SettingSpec: Sendable {
    /// When a changed value takes effect.
    enum Reload: Sendable { case live, restart }

    let name: String
    /// The value's placeholder in `--help` (`URL`, `SIZE`, `SECONDS`).
    let value: String
    let doc: String
    let reload: Reload
    /// Parses `text` into the settings, or says what is wrong with it.
    let set: @Sendable (inout Settings, String) throws(SettingsError) -> Void
    /// The value as text (`-` when unset): the default in `--help`, both
    /// sides of a change in the SIGHUP line.
    let show: @Sendable (Settings) -> String
    /// Copies this setting from one value to another (a reload keeps the
    /// running value of a setting that needs a restart).
    let copy: @Sendable (inout Settings, Settings) -> Void
    /// Whether two settings differ here, when `show` cannot tell (it hides
    /// a secret value); nil: when their `show` differs.
    var differs: (@Sendable (Settings, Settings) -> Bool)? = nil

    /// A setting stored at `path`, parsed by `parse` and shown by `format`.
    static func make<V: Sendable>(_ name: String, _ value: String, _ reload: Reload, _ doc: String,
                                  _ path: WritableKeyPath<Settings, V> & Sendable,
                                  parse: @escaping @Sendable (String, String) throws(SettingsError) -> V,
                                  format: @escaping @Sendable (V) -> String) -> SettingSpec {
        SettingSpec(name: name, value: value, doc: doc, reload: reload,
                    set: { (s: inout Settings, text: String) throws(SettingsError) in s[keyPath: path] = try parse(name, text) },
                    show: { format($0[keyPath: path]) },
                    copy: { $0[keyPath: path] = $1[keyPath: path] })
    }

    /// The environment variable that sets it.
    var environment: String { SettingName.environment(name) }
}
