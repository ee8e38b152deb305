public enum CachectlMain { public static func run() -> Never { exit(1) } }
import Foundation
