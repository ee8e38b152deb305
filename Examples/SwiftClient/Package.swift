// swift-tools-version:6.0
// The original app's two screens as a command-line program, on the
// CachedClient library of the cached package (a dependency by path).
import PackageDescription

let package = Package(
    name: "cached-screens",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "cached", path: "../..")],
    targets: [
        .executableTarget(name: "cached-screens",
                          dependencies: [.product(name: "CachedClient", package: "cached")],
                          swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
