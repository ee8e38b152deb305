import CacheSystem

/// One variant to make: the source's verified descriptor and what to make of it.
public struct VariantJob: Sendable {
    public var spec: VariantSpec
    /// The source object, opened and verified by the store; the pool closes it.
    public var source: FileDescriptor
    public var sourceSize: Int64
    /// `variant-max-dimension`: the bound of a side the spec leaves free.
    public var maxDimension: Int
    /// `max-image-pixels`: the helper refuses a larger image by its header.
    public var maxPixels: Int64
    /// The largest variant taken from the helper (`max-object-size`).
    public var maxResult: Int64
    /// Of an original that failed before (its failure on record): such jobs
    /// never take the last helper, which stays for originals that did not
    /// (`VariantHelpers`).
    public var suspect = false

    public init(spec: VariantSpec, source: FileDescriptor, sourceSize: Int64, maxDimension: Int, maxPixels: Int64, maxResult: Int64) {
        self.spec = spec
        self.source = source
        self.sourceSize = sourceSize
        self.maxDimension = maxDimension
        self.maxPixels = maxPixels
        self.maxResult = maxResult
    }

    var wireHeader: VariantWire.Job {
        VariantWire.Job(spec: spec, maxDimension: maxDimension, maxPixels: maxPixels, maxResult: maxResult, sourceLength: sourceSize)
    }
}

/// A variant the helper made: its encoded bytes and its size in pixels.
public struct MadeVariant: Sendable, Equatable {
    public var bytes: [UInt8]
    public var width: Int
    public var height: Int

    public init(bytes: [UInt8], width: Int, height: Int) {
        self.bytes = bytes
        self.width = width
        self.height = height
    }
}

/// Why a variant was not made.
public enum VariantFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The helper refused the image (more pixels than `max-image-pixels`, not
    /// decodable, truncated): the same bytes will be refused again.
    case refused(String)
    /// The helper could not make it, and said why (an encoder failed, its
    /// memory ran out): the helper goes on.
    case notMade(String)
    /// The helper failed: it crashed, was stopped at a limit, took longer
    /// than `variant-timeout` or broke the protocol. It was replaced; another
    /// try may succeed.
    case helperFailed(String)
    /// The source object could not be read while it was sent.
    case source(SystemError)
    /// No helper could be started (its program missing, or it did not
    /// sandbox itself).
    case unavailable(String)
    /// More jobs wait than the pool queues.
    case busy(String)
    /// The daemon is stopping.
    case stopped

    public var description: String {
        switch self {
        case .refused(let m): "the image was refused: \(m)"
        case .notMade(let m): "the variant helper could not make it: \(m)"
        case .helperFailed(let m): "the variant helper failed: \(m)"
        case .source(let e): "the original could not be read: \(e)"
        case .unavailable(let m): "no variant helper: \(m)"
        case .busy(let m): m
        case .stopped: "the daemon is stopping"
        }
    }
}

extension VariantFailure {
    /// The image itself was refused: it will be refused again.
    public var isRefusal: Bool {
        if case .refused = self { return true }
        return false
    }

    /// Whether the failure is the original's, whatever variant of it is
    /// asked: it was refused (its header, its decode), or the helper failed
    /// on it (crashed, killed at a limit, past `variant-timeout`). Not when
    /// the helper could not make this variant (its encoder failed, it came
    /// out larger than the daemon takes, memory ran out inside libvips).
    public var isTheOriginals: Bool {
        switch self {
        case .refused, .helperFailed: true
        case .notMade, .source, .unavailable, .busy, .stopped: false
        }
    }

    /// Whether the service remembers this failure for a while instead of
    /// trying again at once: the image refused, or a helper that failed or
    /// could not make it (a hostile image asked again would cost a helper
    /// each time). Not a full queue, a read of the original, or shutdown.
    public var remembered: Bool {
        switch self {
        case .refused, .notMade, .helperFailed: true
        case .source, .unavailable, .busy, .stopped: false
        }
    }
}
