import CacheFetch
import CacheService
import CacheStore
import CacheVariant

/// Each subsystem's configuration, built from the settings here and nowhere else.
extension Settings {
    var feedConfiguration: FeedConfiguration {
        // checkPaging() passed when these settings were read: a failure here cannot happen; link is the fallback.
        let postsPaging = (try? self.postsPaging.paging("posts")) ?? .link
        let imagesSettings = effectiveImagesPaging
        let imagesPaging = (try? imagesSettings.paging("images")) ?? .link
        // One URL serves both feeds: the manifest's unset shape is the posts'.
        let same = postsURL != nil && postsURL == imagesURL
        var c = FeedConfiguration(postsURL: postsURL, imagesURL: imagesURL, imagesBaseURL: imagesBaseURL, maxObjectSize: maxObjectSize,
                                  postsShape: FeedShape(prefix: "posts", items: postsItems, next: postsNext, maxPages: postsMaxPages,
                                                        paging: postsPaging, item: self.postsPaging.item, maxItems: postsMaxItems),
                                  imagesShape: FeedShape(prefix: "images", items: imagesItems ?? (same ? postsItems : nil),
                                                         next: imagesNext ?? (same ? postsNext : nil), maxPages: imagesMaxPages ?? (same ? postsMaxPages : FeedShape.defaultMaxPages),
                                                         paging: imagesPaging, item: imagesSettings.item,
                                                         maxItems: imagesMaxItems ?? (same ? postsMaxItems : FeedShape.defaultMaxItems)),
                                  fields: ItemFields(postID: postsID, imageURL: imagesURLField, imageDescription: imagesDescriptionField),
                                  minFreeSpace: minFreeSpace)
        c.imagesRevalidateAfter = imagesRevalidateAfter
        c.postsKeep = postsKeep
        c.feedTimeout = feedTimeout
        c.feedMaxSize = feedMaxSize
        c.postsMinFreeSpace = postsMinFreeSpace ?? minFreeSpace / 4
        return c
    }

    @_spi(Harness) public var serviceConfiguration: ServiceConfiguration {
        var c = ServiceConfiguration(feeds: feedConfiguration, storeDirectory: store, maxBytes: maxSize, fetch: fetch,
                                     credentials: fetchCredentials)
        c.verifyReads = verifyReads
        c.scrub = scrubSettings
        c.variants = variantSettings
        c.maxVariantBytes = variantMaxSize
        c.variantPool = variantPool
        return c
    }

    var variantSettings: VariantSettings {
        var v = VariantSettings()
        v.maxDimension = variantMaxDimension
        v.sizes = variantSizes
        v.maxPixels = maxImagePixels
        v.retryAfter = variantRetryAfter
        return v
    }

    /// The helpers' pool, when `cached-variant` is found beside the daemon.
    var variantPool: VariantPoolConfiguration? {
        guard let executable = VariantHelpers.locate() else { return nil }
        var p = VariantPoolConfiguration(executable: executable)
        p.helpers = variantHelpers
        p.memory = variantMemory
        p.jobTimeout = variantTimeout
        return p
    }

    var scrubSettings: ScrubSettings { ScrubSettings(interval: scrubInterval, rate: scrubRate) }

    /// The configured headers, for the origins of posts-url and images-url.
    var fetchCredentials: FetchCredentials {
        FetchCredentials(headers: allFetchHeaders, originsOf: [postsURL, imagesURL].compactMap { $0 })
    }

    var loopLimits: LoopLimits {
        LoopLimits(maxConnections: maxConnections, maxQueuedBytes: Int(maxQueuedBytes),
                   idle: idleTimeout, maxJSONDepth: maxJSONDepth,
                   maxQueuedBytesTotal: Int(maxQueuedBytesTotal),
                   maxHTTPConnections: httpMaxConnections, httpRequest: httpRequestTimeout)
    }
}
