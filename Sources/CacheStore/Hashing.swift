import CXXHash
import CacheSystem

/// Hashing with XXH3-128 (libxxhash): an object's name, once or streamed.
extension Hash128 {
    /// Hashes `bytes` in one call.
    public init(of bytes: UnsafeRawBufferPointer) {
        let h = XXH3_128bits(bytes.baseAddress, bytes.count)
        self.init(high: h.high64, low: h.low64)
    }

    public init(of bytes: [UInt8]) {
        self = bytes.withUnsafeBytes { Hash128(of: $0) }
    }
}

/// XXH3-128 over a stream of chunks.
public struct StreamingHasher: ~Copyable {
    private let state: OpaquePointer

    public init() {
        state = XXH3_createState()
        XXH3_128bits_reset(state)
    }

    deinit { XXH3_freeState(state) }

    public mutating func reset() { XXH3_128bits_reset(state) }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        XXH3_128bits_update(state, bytes.baseAddress, bytes.count)
    }

    public func digest() -> Hash128 {
        let h = XXH3_128bits_digest(state)
        return Hash128(high: h.high64, low: h.low64)
    }
}

/// A 32-bit checksum for log records: the low half of XXH3-64.
public func recordChecksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
    UInt32(truncatingIfNeeded: XXH3_64bits(bytes.baseAddress, bytes.count))
}
