#if canImport(Glibc)
import Glibc
#endif
import CacheProtocol
import CacheService
import CacheSystem

/// The `cached` executable.
public enum CachedMain {
    /// Parses the command line, runs the daemon until SIGTERM or SIGINT, and exits.
    public static func run() -> Never {
        let environment = Environment.current()
        let arguments = Array(CommandLine.arguments.dropFirst())
        let settings: Settings
        do {
            switch try Settings.parse(arguments: arguments, environment: environment) {
            case .help:
                print(Settings.usage)
                exit(0)
            case .version:
                print("cached \(cachedVersion) (protocol \(protocolVersion))")
                exit(0)
            case .run(let s):
                settings = s
            case .checked(let s):
                print("configuration OK" + (s.configFile.map { " (\($0))" } ?? " (no configuration file)"))
                print("store \(s.store), socket \(s.socket), posts-url \(s.postsURL ?? "-"), images-url \(s.imagesURL ?? "-")"
                      + (s.httpListen.isEmpty ? "" : ", http-listen \(s.httpListen.map(\.description).joined(separator: ","))"))
                // Names only: each value reads <redacted>.
                if !s.fetchHeaders.isEmpty { print("fetch-header \(Settings.shown(s.fetchHeaders))") }
                if let file = s.fetchHeaderFile { print("fetch-header-file \(file)") }
                exit(0)
            }
        } catch {
            var line = Array("cached: \(error)\n".utf8)
            _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
            exit(2)
        }
        exit(Daemon(settings: settings, arguments: arguments, environment: environment).run())
    }
}

