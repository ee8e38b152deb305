// cached-screens: the posts screen and the images screen of the app that
// cached replaces, printed, with every cached image and its thumbnail saved
// to a folder.
//
//   cached-screens [--socket PATH] [--prefetch] OUTPUT-DIRECTORY
#if canImport(Glibc)
import Glibc
#endif
import CachedClient

/// Writes `text` to stderr.
func complain(_ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

var arguments = Array(CommandLine.arguments.dropFirst())
var socket: String?
var prefetch = false
while let first = arguments.first, first.hasPrefix("--") {
    arguments.removeFirst()
    switch first {
    case "--socket" where !arguments.isEmpty: socket = arguments.removeFirst()
    case "--prefetch": prefetch = true
    default:
        complain("usage: cached-screens [--socket PATH] [--prefetch] OUTPUT-DIRECTORY\n")
        exit(2)
    }
}
guard arguments.count == 1 else {
    complain("usage: cached-screens [--socket PATH] [--prefetch] OUTPUT-DIRECTORY\n")
    exit(2)
}
let folder = arguments[0]

/// Writes `bytes` to `path`.
func save(_ bytes: [UInt8], to path: String) -> Bool {
    guard let f = fopen(path, "wb") else { return false }
    defer { fclose(f) }
    return fwrite(bytes, 1, bytes.count, f) == bytes.count
}

/// The extension of a MIME type, for the saved file's name.
func fileExtension(_ type: String?) -> String {
    switch type {
    case "image/png": "png"
    case "image/jpeg": "jpg"
    case "image/gif": "gif"
    case "image/webp": "webp"
    case "image/svg+xml": "svg"
    default: "bin"
    }
}

let cached = CachedClient(socketPath: socket)
do {
    if prefetch {
        for try await event in cached.prefetch() {
            if case .finished(let summary) = event {
                print("prefetched: \(summary.posts?.fetched ?? 0) posts, \(summary.images?.downloaded ?? 0) images downloaded")
            }
        }
    }

    // The first screen: the posts.
    let posts = try await cached.posts()
    print("POSTS (\(posts.count))")
    for post in posts {
        print("#\(post.id) by user \(post.userID.map(String.init) ?? "?"): \(post.title ?? "")")
    }

    // The second screen: the images, each saved; a row not cached is a placeholder.
    let rows = try await cached.images()
    print("IMAGES (\(rows.count))")
    var saved = 0
    for row in rows {
        guard row.isCached else {
            print("[\(row.row)] \(row.description ?? "") — placeholder (not cached)")
            continue
        }
        let bytes = try await cached.imageData(row: row.row)
        let path = "\(folder)/\(row.row).\(fileExtension(row.type))"
        guard save(bytes, to: path) else {
            complain("cannot write \(path)\n")
            exit(1)
        }
        // The table's cell: a 96-pixel thumbnail the daemon makes once for every client.
        let thumb = try await cached.variantData(row: row.row, VariantRequest(width: 96, height: 96, format: .webp))
        guard save(thumb, to: "\(folder)/\(row.row)-thumb.webp") else {
            complain("cannot write \(folder)/\(row.row)-thumb.webp\n")
            exit(1)
        }
        saved += 1
        print("[\(row.row)] \(row.description ?? "") — \(bytes.count) bytes -> \(path), thumbnail \(thumb.count) bytes")
    }
    print("saved \(saved) of \(rows.count) images to \(folder)")
} catch {
    complain("cached-screens: \(error)\n")
    exit(1)
}
