import CacheProtocol

// TEMPORARY stand-in until the libxml2 reader lands (helper branch xml-feeds).
public struct XMLFeedPage: Sendable {
    public enum Format: String, Sendable { case rss2 = "RSS 2.0", rss1 = "RSS 1.0", atom = "Atom 1.0" }
    public var format: Format
    public var items: [JSON]
    public var next: String?
}
public enum XMLFeedReader {
    public static func looksLikeXML(_ body: [UInt8]) -> Bool {
        body.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }.first == UInt8(ascii: "<")
    }
    public static func read(_ body: [UInt8], charset: String?) throws(FeedError) -> XMLFeedPage {
        throw FeedError("XML feeds are not read yet")
    }
}
