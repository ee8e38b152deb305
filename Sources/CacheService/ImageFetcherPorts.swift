import CacheFetch
import CacheStore
import CacheSystem

/// What fetching images needs of the store (`Store` is one).
protocol ImageStore: Sendable {
    /// Throws when the file system would keep less than `minimum` bytes free after `needed` more.
    func checkHeadroom(_ minimum: Int64, needed: Int64) throws(StoreError)
    /// A temp file for a download of at most `maxSize` bytes.
    func newObjectWriter(maxSize: Int64) throws(StoreError) -> ObjectWriter
    /// Stores a download durably and maps `rows` to it (their freshness logged when given).
    func commitObject(_ objectWriter: ObjectWriter, rows: [(row: Int, url: String)], declaredContentType: String?,
                      freshness: ImageFreshness?) throws(StoreError) -> ObjectRef
    /// Logs the rows' new freshness after a 304.
    func refreshFreshness(_ ref: ObjectRef, rows: [(row: Int, url: String)], freshness: ImageFreshness) throws(StoreError)
    /// The object named `hash`, when the index has it.
    func objectRef(_ hash: Hash128) -> ObjectRef?
    /// Whether the object's file is there (one forgotten when it is not).
    func objectIsPresent(_ ref: ObjectRef) -> Bool
}

extension Store: ImageStore {}

/// Who transfers an image (`HTTPClient`, libcurl's multi handle on the fetch thread).
protocol ImageTransfers: Sendable {
    /// Fetches `request` into `sink`; `completion` runs on the fetch thread.
    func fetch(_ request: FetchRequest, into sink: BodySink, completion: @escaping @Sendable (Result<HTTPResponse, FetchError>) -> Void)
}

extension HTTPClient: ImageTransfers {}
