#!/usr/bin/env bash
# make check-version: the version is set in VERSION alone (the Makefile and
# scripts/check-install.sh read it); the files that must carry it too say
# the same, or this names each one that does not. To release another
# version, change VERSION, then each file this lists.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(cat VERSION)
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "check-version: VERSION holds '$version', not MAJOR.MINOR.PATCH"; exit 1
fi
bad=0
# FILE, then the sed script that prints the version it carries.
check() {
  found=$(sed -n "$2" "$1")
  if [ "$found" != "$version" ]; then
    echo "check-version: $1 says '${found:-(no version found)}', VERSION says $version"; bad=1
  fi
}
check Sources/CacheSystem/Version.swift 's/^public let cachedVersion = "\(.*\)"$/\1/p'  # --version, ping, status, User-Agent
check clients/python/pyproject.toml 's/^version = "\(.*\)"$/\1/p'                          # the Python package
check clients/python/cached_client.py 's/^__version__ = "\(.*\)"$/\1/p'                    # the Python module
check packaging/changelog '1s/^cached (\(.*\)) .*$/\1/p'                                   # the .deb's version (scripts/package.sh)
check docs/cached.8 '1s/^\.TH .* "cached \(.*\)" .*$/\1/p'                                 # the man pages' footers
check docs/cachectl.1 '1s/^\.TH .* "cached \(.*\)" .*$/\1/p'
if [ "$bad" != 0 ]; then exit 1; fi
echo "check-version: $version in VERSION, Version.swift, the Python client, the Debian changelog and the man pages"
