#if canImport(Glibc)
import Glibc
#endif
import CacheFetch
import CacheSystem

/// `fetch-header-file`: a file of `Name: value` lines for secrets (blank
/// lines and `#` comments allowed), read at start and at each reload.
///
/// It is refused, naming the fix, unless it is a regular file (not a
/// symbolic link) owned by root or the daemon's user that neither group nor
/// others can read or write, in directories no other user can change
/// (`TrustedFile.secretProblem`). A path may begin with
/// `${CREDENTIALS_DIRECTORY}/`, systemd's directory of the unit's
/// `LoadCredential=` files.
public struct FetchHeaderFile: Sendable, Equatable, CustomStringConvertible {
    /// The path as given.
    public var path: String
    /// The headers read from it (empty until `load`).
    public var headers: [FetchHeader] = []

    /// The variable systemd sets to the directory of a unit's credentials.
    static let credentialsVariable = "CREDENTIALS_DIRECTORY"
    private static let prefixes = ["${\(credentialsVariable)}/", "$\(credentialsVariable)/"]
    /// The largest file accepted.
    static let maxSize = 64 << 10

    /// Checks the spelling of `path` (absolute, or under `${CREDENTIALS_DIRECTORY}`).
    init(path: String) throws(SettingsError) {
        guard path.hasPrefix("/") || Self.prefixes.contains(where: path.hasPrefix) else {
            throw SettingsError("fetch-header-file must be an absolute path or start with ${\(Self.credentialsVariable)}/, not \"\(path)\"")
        }
        self.path = path
    }

    /// The path, and the names it gave: `/run/credentials/x/token (Authorization: <redacted>)`.
    public var description: String {
        headers.isEmpty ? path : "\(path) (\(headers.map(\.description).joined(separator: ", ")))"
    }

    /// `path` with `${CREDENTIALS_DIRECTORY}` replaced from `environment`.
    func resolved(_ environment: [String: String]) throws(SettingsError) -> String {
        guard let prefix = Self.prefixes.first(where: path.hasPrefix) else { return path }
        guard let directory = environment[Self.credentialsVariable], directory.hasPrefix("/") else {
            throw SettingsError("fetch-header-file \(path): \(Self.credentialsVariable) is not set; systemd sets it for a unit "
                                + "with LoadCredential= (docs/operations.md, \"Credentials\")")
        }
        return directory + "/" + path.dropFirst(prefix.count)
    }

    /// Reads the headers from the file; `others` (the `fetch-header`
    /// settings) must not name one of them.
    mutating func load(environment: [String: String], besides others: [FetchHeader]) throws(SettingsError) {
        let file = try resolved(environment)
        let text = try Self.read(file)
        do { headers = try FetchHeader.parseFile(text, path: file) } catch { throw SettingsError("fetch-header-file \(error.message)") }
        guard !headers.isEmpty else { throw SettingsError("fetch-header-file \(file) holds no \"Name: value\" line") }
        if let both = headers.first(where: { h in others.contains { $0.key == h.key } }) {
            throw SettingsError("\(both.name) is given by both fetch-header and fetch-header-file \(file); give it once")
        }
    }

    /// The file's text, if it may be trusted with secrets.
    private static func read(_ path: String) throws(SettingsError) -> String {
        let fd: FileDescriptor
        do {
            // O_NOFOLLOW: a link is refused, not followed; O_NONBLOCK: a FIFO cannot hang the start.
            fd = try FileDescriptor.open(path, [.readOnly, .noFollow, .nonBlocking, .noControllingTerminal])
        } catch where error.errno == ELOOP {
            throw SettingsError("refusing to read the fetch-header-file: \(path) is a symbolic link; name the file itself")
        } catch {
            throw SettingsError("fetch-header-file \(path): \(error)")
        }
        defer { fd.close() }
        if let problem = TrustedFile.secretProblem(fd, path: path) {
            throw SettingsError("refusing to read the fetch-header-file: \(problem)")
        }
        let bytes: [UInt8]
        do { bytes = try fd.readToEnd(limit: maxSize + 1) } catch { throw SettingsError("fetch-header-file \(path): \(error)") }
        guard bytes.count <= maxSize else { throw SettingsError("fetch-header-file \(path): larger than \(maxSize) bytes") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw SettingsError("fetch-header-file \(path): not valid UTF-8") }
        return text
    }
}

extension Settings {
    /// Every configured header: the `fetch-header` ones, then the file's.
    var allFetchHeaders: [FetchHeader] { fetchHeaders + (fetchHeaderFile?.headers ?? []) }

    /// A `fetch-header` value: a later header of the same name replaces the earlier one.
    mutating func addFetchHeader(_ text: String) throws(SettingsError) {
        let header: FetchHeader
        do { header = try FetchHeader(parsing: text) } catch { throw SettingsError("fetch-header \(error.message)") }
        fetchHeaders.removeAll { $0.key == header.key }
        fetchHeaders.append(header)
    }

    /// The configured headers as shown: names, each value `<redacted>`.
    static func shown(_ headers: [FetchHeader]) -> String {
        headers.isEmpty ? "-" : headers.map(\.description).joined(separator: ", ")
    }
}
