import CacheHTTP
import CacheSystem

/// One request header the operator configured (`fetch-header`,
/// `fetch-header-file`): a credential such as `Authorization: Bearer ...`
/// or `X-Api-Key: ...`, sent only to the feeds' origins (`FetchCredentials`).
///
/// Its value is a secret: `description` shows the name alone, and no error
/// of this type ever holds the value.
public struct FetchHeader: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The name as given (compared without regard to case).
    public let name: String
    /// The value, without the spaces and tabs around it.
    public let value: String

    /// `Name: <redacted>`.
    public var description: String { "\(name): \(Self.redacted)" }
    /// The same: `debugPrint`, string interpolation of a collection and
    /// `dump` never show the value either.
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["name": name, "value": Self.redacted]) }

    /// What is shown in place of a value.
    public static let redacted = "<redacted>"

    /// The line as libcurl's header list takes it.
    var line: String { "\(name): \(value)" }

    /// The name lowercased, for comparisons.
    public var key: String { name.lowercased() }

    /// Parses `Name: value`: the name an RFC 9110 token that is not one of
    /// the headers cached sends itself (`managed`), the value non-empty and
    /// free of control characters but HTAB (no CR, LF or NUL).
    public init(parsing line: String) throws(FetchHeaderError) {
        let bytes = Array(line.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else {
            throw FetchHeaderError("must be \"Name: value\", and there is no colon")
        }
        let nameBytes = bytes[..<colon]
        guard !nameBytes.isEmpty else { throw FetchHeaderError("must be \"Name: value\", and there is no name before the colon") }
        if let bad = nameBytes.first(where: { !HTTPGrammar.isTokenByte($0) }) {
            // The name is shown only when it is a token: what precedes a
            // misplaced colon may be part of the secret.
            throw FetchHeaderError("must be \"Name: value\", and the name holds \(Self.describe(bad)), which an HTTP field name cannot "
                                   + "(letters, digits and !#$%&'*+-.^_`|~ only)")
        }
        let name = String(decoding: nameBytes, as: UTF8.self)
        var start = colon + 1, end = bytes.count
        while start < end, HTTPGrammar.isWhitespace(bytes[start]) { start += 1 }
        while end > start, HTTPGrammar.isWhitespace(bytes[end - 1]) { end -= 1 }
        let value = bytes[start..<end]
        if let reason = Self.managed[name.lowercased()] {
            throw FetchHeaderError("\(name) is sent by cached itself (\(reason)); it cannot be configured")
        }
        guard !value.isEmpty else { throw FetchHeaderError("\(name) has an empty value") }
        guard HTTPGrammar.isFieldValue(value) else {
            throw FetchHeaderError("\(name) has a value holding a control character (CR, LF, NUL or another), which would end or split the request's header")
        }
        self.name = name
        self.value = String(decoding: value, as: UTF8.self)
    }

    /// Headers that libcurl or cached set, by lowercased name, with why.
    static let managed: [String: String] = {
        var m: [String: String] = [
            "host": "from the URL",
            "user-agent": "cached/VERSION",
            "accept-encoding": "libcurl asks for compressed bodies and decodes them",
            "range": "whole bodies are fetched",
            "proxy-authorization": "it is for a proxy, and fetch-header goes to the origin",
        ]
        for name in ["if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range"] {
            m[name] = "revalidation sends the stored ETag and Last-Modified"
        }
        for name in ["content-length", "transfer-encoding", "te", "trailer", "connection", "keep-alive",
                     "upgrade", "proxy-connection", "expect", "http2-settings"] {
            m[name] = "libcurl frames the request and manages the connection"
        }
        return m
    }()

    /// A byte of a name, in words ("a space", "\"@\"", "byte 0x00").
    private static func describe(_ b: UInt8) -> String {
        switch b {
        case 0x20: return "a space"
        case 0x09: return "a tab"
        case 0x21...0x7E: return "\"\(Character(Unicode.Scalar(b)))\""
        default: return "byte 0x" + String(b, radix: 16, uppercase: true)
        }
    }

    /// The headers of a file of `Name: value` lines (blank lines and `#`
    /// comments allowed); errors read `PATH:LINE: message`, never with a value.
    public static func parseFile(_ text: String, path: String) throws(FetchHeaderError) -> [FetchHeader] {
        var out: [FetchHeader] = []
        for (n, raw) in text.lines().enumerated() {
            let line = raw.trimmed()
            if line.isEmpty || line.hasPrefix("#") { continue }
            let header: FetchHeader
            do { header = try FetchHeader(parsing: line) } catch { throw FetchHeaderError("\(path):\(n + 1): \(error.message)") }
            if out.contains(where: { $0.key == header.key }) {
                throw FetchHeaderError("\(path):\(n + 1): \(header.name) is given twice; give it once")
            }
            out.append(header)
        }
        return out
    }
}

/// A configured header that cannot be used; the message names the header
/// (or the line) and the problem, never the value. It reads after the
/// setting's name: `fetch-header Host is sent by cached itself ...`.
public struct FetchHeaderError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
