import CacheDaemon
CachedMain.run()
