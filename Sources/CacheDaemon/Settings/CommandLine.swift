import CacheSystem

extension Settings {
    /// Defaults, then the configuration file, then the environment, then the
    /// flags (each later one wins). The file is `--config PATH` (which must
    /// exist) or /etc/cached/cached.conf when present.
    public static func parse(arguments: [String], environment: [String: String]) throws(SettingsError) -> ParsedCommandLine {
        var flags: [(key: String, value: String)] = []
        var configPath: String?
        var check = false
        var i = 0
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if arg == "--help" || arg == "-h" { return .help }
            if arg == "--version" { return .version }
            if arg == "--check-config" { check = true; continue }
            guard arg.hasPrefix("--") else { throw SettingsError("unexpected argument \"\(arg)\" (see --help)") }
            var key = String(arg.dropFirst(2))
            var value: String
            if let eq = key.firstIndex(of: "=") {
                value = String(key[key.index(after: eq)...])
                key = String(key[..<eq])
            } else if spec(key)?.value == "[BOOL]" && (i >= arguments.count || arguments[i].hasPrefix("--")) {
                value = "true"  // a flag that may stand alone (prefetch-on-start, http-allow-admin)
            } else {
                guard i < arguments.count else { throw SettingsError("\(SettingName.flag(key)) needs a value") }
                value = arguments[i]
                i += 1
            }
            if key == "config" { configPath = value; continue }
            guard spec(key) != nil else { throw SettingsError("unknown option \(SettingName.flag(ConfigFile.shownKey(key))) (see --help)") }
            flags.append((key, value))
        }
        var s = try fromFile(configPath, environment: environment)
        for spec in table {
            guard let v = environment[spec.environment] else { continue }
            do { try spec.set(&s, v) } catch { throw SettingsError("\(spec.environment): \(error.message)") }
        }
        for (key, value) in flags {
            do { try s.set(key, value) } catch { throw SettingsError("\(SettingName.flag(key)): \(error.message)") }
        }
        // Read once every source has had its say: only the file that wins is opened.
        try s.fetchHeaderFile?.load(environment: environment, besides: s.fetchHeaders)
        try s.checkPaging()
        return check ? .checked(s) : .run(s)
    }

    /// The defaults with the configuration file applied.
    private static func fromFile(_ configPath: String?, environment: [String: String]) throws(SettingsError) -> Settings {
        var s = Settings(environment: environment)
        let path = configPath ?? ConfigFile.defaultPath
        if let text = try ConfigFile.read(path) {
            try ConfigFile.apply(try ConfigFile.parse(text, path: path), path: path, to: &s)
            s.configFile = path
        } else if configPath != nil {
            throw SettingsError("\(path): no such configuration file")
        }
        return s
    }

    /// `--help`: the synopsis and one line per setting with its default.
    public static var usage: String {
        let defaults = Settings()
        let width = table.map { $0.name.count + $0.value.count }.max() ?? 0
        var lines = [
            "usage: cached [--config FILE] [--SETTING VALUE ...]",
            "       cached [--config FILE] --check-config",
            "       cached --help | --version",
            "",
            "Keeps a durable, content-addressed local copy of a JSON posts feed and of",
            "the images of a manifest, and serves it over a Unix socket (see cachectl).",
            "Settings come from the configuration file (--config FILE, default",
            "\(ConfigFile.defaultPath) when present; \"key = value\" lines), then the",
            "environment (CACHED_<SETTING>, for example CACHED_POSTS_URL), then the",
            "flags; later ones win. Sizes take K, M, G suffixes (1024). Settings marked",
            "* change on SIGHUP; the others need a restart.",
            "",
        ]
        for spec in table {
            let head = "\(SettingName.flag(spec.name)) \(spec.value)"
            let pad = String(repeating: " ", count: width + 4 - head.count)
            let shown = spec.value == "SIZE" ? sizeText(spec.show(defaults)) : spec.show(defaults)
            let def = spec.name == "store" || spec.name == "socket" ? "" : " (default \(shown))"
            lines.append("  \(head)\(pad)\(spec.reload == .live ? "*" : " ") \(spec.doc)\(shown == "-" ? "" : def)")
        }
        return lines.joined(separator: "\n")
    }

    /// A byte count as the largest exact K, M or G spelling ("67108864" → "64M").
    private static func sizeText(_ bytes: String) -> String {
        guard var n = Int64(bytes), n > 0 else { return bytes }
        for suffix in ["", "K", "M", "G"] {
            if n % 1024 != 0 || suffix == "G" { return "\(n)\(suffix)" }
            n /= 1024
        }
        return bytes
    }
}
