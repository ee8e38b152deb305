import CacheSystem

/// The messages between the daemon and a `cached-variant` helper over its
/// standard input and output (docs/architecture.md, "Image variants"). All
/// integers little-endian. The helper is untrusted: every size it states is
/// checked against the job's bounds before anything is allocated.
///
/// - Ready (helper, once, after it sandboxed itself): `CVOK`, a version byte,
///   three zero bytes.
/// - Job (daemon): `CVRQ`, version, format, fit, a zero byte, `u32` width
///   (0: none), `u32` height (0: none), `u32` the bound of a missing side
///   (`variant-max-dimension`), `u32` zero, `u64` max-image-pixels, `u64` the
///   largest result the daemon takes, `u64` the source's length, then the
///   source's bytes.
/// - Result (helper): `CVRS`, status (0 made, 1 the image was refused,
///   2 the helper failed), three zero bytes, `u32` width, `u32` height,
///   `u64` length, then that many bytes: the variant, or a UTF-8 message.
public enum VariantWire {
    public static let version: UInt8 = 1
    public static let readyMagic: [UInt8] = Array("CVOK".utf8)
    public static let jobMagic: [UInt8] = Array("CVRQ".utf8)
    public static let resultMagic: [UInt8] = Array("CVRS".utf8)
    /// The ready message's length.
    public static let readySize = 8
    /// A job's header, before the source's bytes.
    public static let jobHeaderSize = 48
    /// A result's header, before its bytes.
    public static let resultHeaderSize = 24
    /// The longest message a helper may send about a failure.
    public static let maxMessage = 4096

    /// The ready message.
    public static var ready: [UInt8] { readyMagic + [version, 0, 0, 0] }

    /// A job's header, before its source.
    public struct Job: Sendable, Equatable {
        public var width: Int?
        public var height: Int?
        public var fit: VariantFit
        public var format: VariantFormat
        /// The bound of a missing side of the box.
        public var maxDimension: Int
        /// Refuse an image of more pixels than this (its first frame), by its header.
        public var maxPixels: Int64
        /// The largest result the daemon takes.
        public var maxResult: Int64
        public var sourceLength: Int64

        public init(spec: VariantSpec, maxDimension: Int, maxPixels: Int64, maxResult: Int64, sourceLength: Int64) {
            width = spec.width
            height = spec.height
            fit = spec.fit
            format = spec.format
            self.maxDimension = maxDimension
            self.maxPixels = maxPixels
            self.maxResult = maxResult
            self.sourceLength = sourceLength
        }

        /// The header's bytes.
        public var encoded: [UInt8] {
            var out = VariantWire.jobMagic + [VariantWire.version, format.rawValue, fit.rawValue, 0]
            out.appendLE(UInt32(clamping: width ?? 0))
            out.appendLE(UInt32(clamping: height ?? 0))
            out.appendLE(UInt32(clamping: maxDimension))
            out.appendLE(UInt32(0))
            out.appendLE(UInt64(clamping: maxPixels))
            out.appendLE(UInt64(clamping: maxResult))
            out.appendLE(UInt64(clamping: sourceLength))
            return out
        }

        /// Reads a header (`jobHeaderSize` bytes); nil with why when it is not one.
        public static func decode(_ b: [UInt8]) -> Result<Job, WireError> {
            guard b.count == VariantWire.jobHeaderSize, Array(b[0..<4]) == VariantWire.jobMagic else {
                return .failure(WireError("not a job header"))
            }
            guard b[4] == VariantWire.version else { return .failure(WireError("job version \(b[4]), not \(VariantWire.version)")) }
            guard let format = VariantFormat(rawValue: b[5]), let fit = VariantFit(rawValue: b[6]) else {
                return .failure(WireError("unknown format \(b[5]) or fit \(b[6])"))
            }
            let w = Int(b.u32LE(at: 8)), h = Int(b.u32LE(at: 12))
            let spec = VariantSpec(width: w == 0 ? nil : w, height: h == 0 ? nil : h, fit: fit, format: format)
            return .success(Job(spec: spec, maxDimension: Int(b.u32LE(at: 16)), maxPixels: Int64(clamping: b.u64LE(at: 24)),
                                maxResult: Int64(clamping: b.u64LE(at: 32)), sourceLength: Int64(clamping: b.u64LE(at: 40))))
        }
    }

    /// What a result says before its bytes.
    public struct ResultHeader: Sendable, Equatable {
        public enum Status: UInt8, Sendable {
            /// The bytes are the variant.
            case made = 0
            /// The image was refused (too many pixels, not decodable): the
            /// bytes say why. The same image will be refused again.
            case refused = 1
            /// The helper could not make it (an encoder failed, out of memory): the bytes say why.
            case failed = 2
        }
        public var status: Status
        public var width: Int
        public var height: Int
        public var length: Int64

        public init(status: Status, width: Int, height: Int, length: Int64) {
            self.status = status
            self.width = width
            self.height = height
            self.length = length
        }

        public var encoded: [UInt8] {
            var out = VariantWire.resultMagic + [status.rawValue, 0, 0, 0]
            out.appendLE(UInt32(clamping: width))
            out.appendLE(UInt32(clamping: height))
            out.appendLE(UInt64(clamping: length))
            return out
        }

        /// Reads a header (`resultHeaderSize` bytes); nil with why when it is not one.
        public static func decode(_ b: [UInt8]) -> Result<ResultHeader, WireError> {
            guard b.count == VariantWire.resultHeaderSize, Array(b[0..<4]) == VariantWire.resultMagic else {
                return .failure(WireError("not a result header"))
            }
            guard let status = Status(rawValue: b[4]) else { return .failure(WireError("unknown status \(b[4])")) }
            return .success(ResultHeader(status: status, width: Int(b.u32LE(at: 8)), height: Int(b.u32LE(at: 12)),
                                         length: Int64(clamping: b.u64LE(at: 16))))
        }
    }

    /// A message that breaks this format.
    public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }
}

extension Array where Element == UInt8 {
    mutating func appendLE(_ v: UInt32) { for i in 0..<4 { append(UInt8(truncatingIfNeeded: v >> (8 * i))) } }
    mutating func appendLE(_ v: UInt64) { for i in 0..<8 { append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }
    func u32LE(at o: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(self[o + $1]) << (8 * $1) } }
    func u64LE(at o: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(self[o + $1]) << (8 * UInt64($1)) } }
}
