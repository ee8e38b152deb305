/// `withUnsafeBytes` that keeps a typed error (the standard one is `rethrows`,
/// which erases it to `any Error`).
extension Array where Element == UInt8 {
    @inlinable @inline(__always)
    public func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        var result: Result<R, E>?
        withUnsafeBytes { raw in result = Result { () throws(E) -> R in try body(raw) } }
        return try result!.get()
    }

    @inlinable @inline(__always)
    public mutating func withMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        var result: Result<R, E>?
        withUnsafeMutableBytes { raw in result = Result { () throws(E) -> R in try body(raw) } }
        return try result!.get()
    }
}
