// No Foundation here: `Progress` is the service's, not Foundation's class.
import CacheService

typealias ServiceProgress = Progress
