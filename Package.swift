// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// Debian's multiarch directory name, where glib keeps glibconfig.h.
#if arch(arm64)
let multiarch = "aarch64-linux-gnu"
#else
let multiarch = "x86_64-linux-gnu"
#endif

let package = Package(
    name: "cached",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "cached", targets: ["cached"]),
        .executable(name: "cachectl", targets: ["cachectl"]),
        // The sandboxed image decoder the daemon starts for variants (never linked into it).
        .executable(name: "cached-variant", targets: ["cached-variant"]),
        // The Swift client library another package depends on
        // (`.product(name: "CachedClient", package: "cached")`): no daemon in it.
        .library(name: "CachedClient", targets: ["CachedClient"]),
    ],
    targets: [
        // C shims over what Swift cannot call or Glibc does not export.
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("curl")]),
        .systemLibrary(name: "CXXHash", pkgConfig: "libxxhash"),
        // libxml2's streaming reader, for RSS and Atom feeds (XMLFeedReader).
        .systemLibrary(name: "CXML2", pkgConfig: "libxml-2.0"),
        .target(name: "CLinux"),
        // The variant helper's C side: libvips calls (variadic in C) and its
        // seccomp sandbox. libvips is linked here alone: the daemon never
        // links a decoder. Its headers need glib's two include directories
        // (what `pkg-config --cflags vips` adds besides -pthread, which
        // SwiftPM refuses with a warning on every build, and the headers of
        // libraries vips.h does not include).
        .target(name: "CVipsShim",
                cSettings: [.unsafeFlags(["-I/usr/include/glib-2.0", "-I/usr/lib/\(multiarch)/glib-2.0/include"])],
                linkerSettings: [.linkedLibrary("vips"), .linkedLibrary("gobject-2.0"), .linkedLibrary("glib-2.0")]),

        // Typed wrappers over raw syscalls, and the few concurrency primitives.
        .target(name: "CacheSystem", dependencies: ["CLinux"], swiftSettings: strict),
        // The store on disk: objects, posts, index log, recovery, verification.
        .target(name: "CacheStore", dependencies: ["CacheSystem", "CacheHTTP", "CXXHash", "CLinux"], swiftSettings: strict),
        // HTTP through curl_multi; knows nothing about the store.
        .target(name: "CacheFetch", dependencies: ["CacheSystem", "CacheHTTP", "CCurl"], swiftSettings: strict),
        // HTTP without I/O: the grammar (HTTPGrammar), request heads, targets,
        // ranges and response heads, dates, Cache-Control, Link and URI
        // references; what the server side, the fetcher, the store's
        // validators and the feed walk each read or write of HTTP.
        .target(name: "CacheHTTP", dependencies: ["CacheSystem"], swiftSettings: strict),
        // Image variants: the helper processes' pool and the messages to them.
        .target(name: "CacheVariant", dependencies: ["CacheSystem", "CLinux"], swiftSettings: strict),
        // JSON, wire types, framing and a blocking client.
        .target(name: "CacheProtocol", dependencies: ["CacheSystem"], swiftSettings: strict),
        // The one service API every front-end calls: feeds, images, objects,
        // prefetch and maintenance over the store and the origin, with the
        // error model that says what failed (docs/architecture.md).
        .target(name: "CacheService",
                dependencies: ["CacheSystem", "CacheHTTP", "CacheStore", "CacheFetch", "CacheProtocol", "CacheVariant", "CXML2"],
                swiftSettings: strict),
        // The daemon: settings, the socket front-end (event loop, JSON-lines
        // dispatch) and process life (systemd, signals). Never the store.
        //
        // Release builds of the daemon's front-end skip the run-time
        // exclusivity checks of class properties (the event loop's
        // connections): measured at 4-5% of the daemon's time per request,
        // and 5-16% less daemon CPU per get_post without them
        // (docs/performance.md). The compile-time checks stay, and debug
        // builds, which every test and sanitizer run uses, keep the run-time
        // ones, so a violation is still caught by the suite.
        .target(name: "CacheDaemon",
                dependencies: ["CacheSystem", "CacheService", "CacheFetch", "CacheProtocol", "CacheHTTP", "CacheVariant", "CLinux"],
                // The page's files, embedded by scripts/embed-page.py (IndexPageAssets+Body, +Style and +Script.swift).
                exclude: ["HTTP/Page"],
                swiftSettings: strict + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]),
        // The async Swift client (posts as Codable, images, prefetch as a
        // stream), one pipelined connection shared by concurrent tasks.
        .target(name: "CachedClient", dependencies: ["CachedClientCore", "CacheProtocol", "CacheSystem"], swiftSettings: strict),
        // Its connection code without `async` (pipelining, answer order,
        // reconnecting, the error type): what cachectl links, so that it
        // does not carry Swift's concurrency runtime.
        .target(name: "CachedClientCore", dependencies: ["CacheProtocol", "CacheSystem"], swiftSettings: strict),
        // cachectl's commands and output, on the client's connection code.
        .target(name: "CacheCLI", dependencies: ["CacheSystem", "CacheProtocol", "CachedClientCore"], swiftSettings: strict),

        .executableTarget(name: "cached", dependencies: ["CacheDaemon"], swiftSettings: strict),
        // The daemon's request handling without sockets or a loop, for the
        // request fuzz target and the dispatcher's tests (not in `cached`).
        .target(name: "CacheDaemonHarness",
                dependencies: ["CacheDaemon", "CacheService", "CacheProtocol", "CacheHTTP", "CacheSystem"],
                swiftSettings: strict),
        // The variant helper: reads a job on stdin, makes the variant with
        // libvips under seccomp and resource limits, writes it on stdout.
        .executableTarget(name: "cached-variant", dependencies: ["CacheVariant", "CVipsShim"], swiftSettings: strict),
        // cachectl runs once per call in scripts: linked fully statically in
        // release builds (no dynamic loader, no shared Swift runtime to map),
        // it starts in a third of the time and half the memory
        // (docs/performance.md). lld, because it does not repeat glibc's
        // link-time notes about the runtime's optional dlopen.
        .executableTarget(name: "cachectl", dependencies: ["CacheCLI"], swiftSettings: strict,
                          linkerSettings: [.unsafeFlags(["-static-executable", "-use-ld=lld"], .when(platforms: [.linux], configuration: .release))]),
        // Fuzz targets (make fuzz): built with -sanitize=fuzzer they are
        // libFuzzer's entry; in a normal build they replay corpus files.
        .executableTarget(name: "cached-fuzz",
                          dependencies: ["CacheStore", "CacheProtocol", "CacheService", "CacheDaemon", "CacheDaemonHarness", "CacheHTTP"],
                          swiftSettings: strict),
        // Benchmarks (make bench-store): not tests, no timing assertions.
        .executableTarget(name: "cached-bench",
                          dependencies: ["CacheStore", "CacheSystem", "CacheProtocol", "CLinux"],
                          swiftSettings: strict),

        // What several test targets share: the fault origin's launcher, planted file trees.
        .target(name: "TestSupport", path: "Tests/TestSupport", swiftSettings: strict),
        .testTarget(name: "CacheStoreTests", dependencies: ["CacheStore", "CacheSystem", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "CacheProtocolTests", dependencies: ["CacheProtocol"], swiftSettings: strict),
        .testTarget(name: "CacheHTTPTests", dependencies: ["CacheHTTP", "CacheSystem"], swiftSettings: strict),
        .testTarget(name: "CachedClientTests", dependencies: ["CachedClient", "CacheProtocol"], swiftSettings: strict),
        .testTarget(name: "CacheSystemTests", dependencies: ["CacheSystem", "CLinux", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "CacheFetchTests", dependencies: ["CacheFetch", "CacheHTTP", "CacheSystem", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "CacheServiceTests",
                    dependencies: ["CacheService", "CacheStore", "CacheProtocol", "CacheFetch", "CacheHTTP", "CacheSystem", "CacheVariant", "TestSupport"],
                    swiftSettings: strict),
        // The variant helper pool alone, against the real helper and helpers that misbehave.
        .testTarget(name: "CacheVariantTests", dependencies: ["CacheVariant", "CacheSystem", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "CacheDaemonTests", dependencies: ["CacheDaemon", "CacheDaemonHarness", "CacheProtocol", "CacheFetch", "CacheStore", "CacheHTTP", "CacheSystem"],
                    swiftSettings: strict),
        .testTarget(name: "IntegrationTests",
                    dependencies: ["CacheProtocol", "CacheSystem", "CacheStore", "CacheVariant", "CLinux", "CachedClient", "TestSupport"],
                    swiftSettings: strict),
    ]
)
