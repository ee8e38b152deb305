import CacheService

/// Each subsystem's configuration, built from the settings here and nowhere else.
extension Settings {
    var feedConfiguration: FeedConfiguration {
        FeedConfiguration(postsURL: postsURL, imagesURL: imagesURL, imagesBaseURL: imagesBaseURL, maxObjectSize: maxObjectSize,
                          postsShape: FeedShape(prefix: "posts", items: postsItems, next: postsNext, maxPages: postsMaxPages),
                          imagesShape: FeedShape(prefix: "images", items: imagesItems, next: imagesNext, maxPages: imagesMaxPages),
                          fields: ItemFields(postID: postsID, imageURL: imagesURLField, imageDescription: imagesDescriptionField))
    }

    var serviceConfiguration: ServiceConfiguration {
        ServiceConfiguration(feeds: feedConfiguration, storeDirectory: store, maxBytes: maxSize, fetch: fetch)
    }

    var loopLimits: LoopLimits {
        LoopLimits(maxConnections: maxConnections, maxQueuedBytes: Int(maxQueuedBytes),
                   idleNanoseconds: UInt64(idleTimeout * 1e9), maxJSONDepth: maxJSONDepth,
                   maxQueuedBytesTotal: Int(maxQueuedBytesTotal),
                   maxHTTPConnections: httpMaxConnections, httpRequestNanoseconds: UInt64(httpRequestTimeout * 1e9))
    }
}
