import CacheProtocol

/// A `Decoder` over a parsed `JSON` value: the daemon's answers become
/// `Codable` types without Foundation (cachectl, built on this library, is
/// a small static binary).
struct JSONTreeDecoder: Decoder {
    let value: JSON
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    static func decode<T: Decodable>(_ type: T.Type, from value: JSON) throws -> T {
        try T(from: JSONTreeDecoder(value: value))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let pairs) = value else { throw mismatch("an object") }
        return KeyedDecodingContainer(Keyed<Key>(pairs: pairs, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = value else { throw mismatch("an array") }
        return Unkeyed(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(value: value, codingPath: codingPath) }

    private func mismatch(_ expected: String) -> DecodingError {
        .typeMismatch(JSON.self, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(String(decoding: value.encoded.prefix(80), as: UTF8.self))"))
    }

    /// One value decoded as a single value (numbers, strings, booleans, null).
    struct Single: SingleValueDecodingContainer {
        let value: JSON
        var codingPath: [any CodingKey]

        func decodeNil() -> Bool { value == .null }

        private func fail(_ type: Any.Type) -> DecodingError {
            .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "found \(String(decoding: value.encoded.prefix(80), as: UTF8.self))"))
        }

        func decode(_ type: Bool.Type) throws -> Bool { guard let b = value.bool else { throw fail(type) }; return b }
        func decode(_ type: String.Type) throws -> String { guard let s = value.string else { throw fail(type) }; return s }
        func decode(_ type: Double.Type) throws -> Double { guard let d = value.double else { throw fail(type) }; return d }
        func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

        func decode<T: BinaryInteger & Decodable>(integer type: T.Type) throws -> T {
            guard let i = value.integer, let v = T(exactly: i) else { throw fail(type) }
            return v
        }
        func decode(_ type: Int.Type) throws -> Int { try decode(integer: type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try decode(integer: type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try decode(integer: type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try decode(integer: type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try decode(integer: type) }
        func decode(_ type: UInt.Type) throws -> UInt { try decode(integer: type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try decode(integer: type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try decode(integer: type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try decode(integer: type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try decode(integer: type) }

        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try T(from: JSONTreeDecoder(value: value, codingPath: codingPath))
        }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let pairs: [(String, JSON)]
        var codingPath: [any CodingKey]

        /// The last value of `key` (a repeated key keeps its last, as JavaScript reads it).
        private func find(_ key: Key) -> JSON? { pairs.last { $0.0 == key.stringValue }?.1 }

        var allKeys: [Key] {
            var seen = Set<String>()
            return pairs.compactMap { seen.insert($0.0).inserted ? Key(stringValue: $0.0) : nil }
        }

        func contains(_ key: Key) -> Bool { find(key) != nil }

        func decodeNil(forKey key: Key) throws -> Bool { (find(key) ?? .null) == .null }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            guard let v = find(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no \"\(key.stringValue)\""))
            }
            return try T(from: JSONTreeDecoder(value: v, codingPath: codingPath + [key]))
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try JSONTreeDecoder(value: find(key) ?? .null, codingPath: codingPath + [key]).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try JSONTreeDecoder(value: find(key) ?? .null, codingPath: codingPath + [key]).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder { JSONTreeDecoder(value: .object(pairs), codingPath: codingPath) }
        func superDecoder(forKey key: Key) throws -> any Decoder { JSONTreeDecoder(value: find(key) ?? .null, codingPath: codingPath + [key]) }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let items: [JSON]
        var codingPath: [any CodingKey]
        var currentIndex = 0

        init(items: [JSON], codingPath: [any CodingKey]) {
            self.items = items
            self.codingPath = codingPath
        }

        var count: Int? { items.count }
        var isAtEnd: Bool { currentIndex >= items.count }

        private mutating func next() throws -> JSON {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(JSON.self, .init(codingPath: codingPath, debugDescription: "the array has only \(items.count) items"))
            }
            defer { currentIndex += 1 }
            return items[currentIndex]
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, items[currentIndex] == .null else { return false }
            currentIndex += 1
            return true
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let v = try next()
            return try T(from: JSONTreeDecoder(value: v, codingPath: codingPath))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            try JSONTreeDecoder(value: try next(), codingPath: codingPath).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            try JSONTreeDecoder(value: try next(), codingPath: codingPath).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder { JSONTreeDecoder(value: try next(), codingPath: codingPath) }
    }
}

/// A coding key of any name: every member of an object.
struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
