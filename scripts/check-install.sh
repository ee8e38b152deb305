#!/usr/bin/env bash
# make check-install: the whole life of the package on this machine's real
# dpkg, as root: install, use, upgrade, remove, purge; then the machine as
# it was. Usage: check-install.sh PACKAGE_DIR (make deb's dist/).
set -euo pipefail
dist=${1:?usage: check-install.sh DIST_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
arch=$(dpkg --print-architecture)
new="$dist/cached_$(cat "$here/VERSION")_$arch.deb"
dbgsym="${new/cached_/cached-dbgsym_}"
if [ "$(id -u)" != 0 ]; then echo "check-install: not run: it installs a package, and needs root"; exit 0; fi
if dpkg -s cached >/dev/null 2>&1; then
  echo "check-install: FAILED to run: a cached package is installed already (dpkg -P cached first)"; exit 1
fi
work=$(mktemp -d /tmp/cached-check-install-XXXXXX)
had_group=$(getent group cached >/dev/null && echo yes || echo no)
had_store=$([ -e /var/cache/cached ] && echo yes || echo no)
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
  dpkg -P cached-dbgsym cached >/dev/null 2>&1 || true
  [ "$had_store" = no ] && rm -rf /var/cache/cached
  [ "$had_group" = no ] && getent group cached >/dev/null && delgroup --system cached >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-install: FAILED: $*"; exit 1; }
step() { echo "check-install: $*"; }

# The previous build: the same files under an earlier version.
dpkg-deb -R "$new" "$work/prev"
sed -i 's/^Version: \(.*\)$/Version: \1~prev1/' "$work/prev/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz --build "$work/prev" "$work/cached_prev.deb" >/dev/null

step "install $(basename "$work/cached_prev.deb") (the previous build)"
dpkg -i "$work/cached_prev.deb" >/dev/null
cached --version | grep -q '^cached ' || fail "cached --version"
cachectl --help >/dev/null || fail "cachectl --help"
man -w cached >/dev/null && man -w cachectl >/dev/null || fail "the man pages are not found by man"
[ "$(LC_ALL=C.UTF-8 MANWIDTH=80 man cached 2>/dev/null | head -1 | tr -s ' ')" != "" ] || fail "man cached shows nothing"
getent group cached >/dev/null || fail "no group cached"
[ "$(stat -c '%U:%G %a' /var/cache/cached)" = "root:cached 750" ] || fail "/var/cache/cached is $(stat -c '%U:%G %a' /var/cache/cached)"
for u in cached.service cached.socket cached-http.socket cached-prefetch.service cached-prefetch.timer \
         cached@.service cached@.socket cached-prefetch@.service cached-prefetch@.timer; do
  [ -f "/usr/lib/systemd/system/$u" ] || fail "no unit $u"
done
[ -L /etc/systemd/system/sockets.target.wants/cached.socket ] || fail "cached.socket is not enabled"
[ ! -e /etc/systemd/system/sockets.target.wants/cached-http.socket ] || fail "cached-http.socket is enabled: HTTP must stay off"

step "use it: a store with posts in /var/cache/cached, an edited /etc/cached/cached.conf"
python3 "$here/Examples/origin-server.py" --root "$here/Examples/origin" --port-file "$work/port" >/dev/null 2>&1 &
origin=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(cat "$work/port")
cached --store /var/cache/cached --socket "$work/cached.sock" --posts-url "http://127.0.0.1:$port/posts.json" \
  --images-url "http://127.0.0.1:$port/images/manifest.json" 2>"$work/log" &
daemon=$!
for _ in $(seq 200); do cachectl --socket "$work/cached.sock" ping >/dev/null 2>&1 && break; sleep 0.05; done
cachectl --socket "$work/cached.sock" prefetch posts >/dev/null || fail "prefetch: $(cat "$work/log")"
# The installed daemon finds its variant helper in /usr/lib/cached and makes a thumbnail with it.
cachectl --socket "$work/cached.sock" get image 0 --width 32 --format png -o "$work/thumb.png" 2>/dev/null || fail "a variant: $(cat "$work/log")"
[ "$(head -c 4 "$work/thumb.png" | od -An -tx1 | tr -d ' ')" = 89504e47 ] || fail "the variant is not a PNG"
grep -q "variants: made by /usr/lib/cached/cached-variant" "$work/log" || fail "the daemon did not use /usr/lib/cached/cached-variant: $(cat "$work/log")"
kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=""
kill "$origin"; wait "$origin" 2>/dev/null || true
echo "# edited by check-install" >> /etc/cached/cached.conf
posts_before=$(find /var/cache/cached/posts -type f | wc -l)
[ "$posts_before" = 100 ] || fail "the store holds $posts_before post files"

step "upgrade to $(basename "$new")"
dpkg -i "$new" >/dev/null
grep -q '^# edited by check-install$' /etc/cached/cached.conf || fail "the upgrade lost the edit of cached.conf"
[ "$(find /var/cache/cached/posts -type f | wc -l)" = 100 ] || fail "the upgrade changed the store"
cached --store /var/cache/cached --socket "$work/cached.sock" 2>"$work/log" &
daemon=$!
for _ in $(seq 200); do cachectl --socket "$work/cached.sock" ping >/dev/null 2>&1 && break; sleep 0.05; done
[ "$(cachectl --socket "$work/cached.sock" --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["posts"])')" = 100 ] \
  || fail "the store does not open with its 100 posts after the upgrade: $(cat "$work/log")"
kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=""

step "install the debug symbols"
dpkg -i "$dbgsym" >/dev/null
for b in /usr/bin/cached /usr/bin/cachectl /usr/lib/cached/cached-variant; do
  id=$(readelf -n "$b" | awk '/Build ID:/ {print $3}')
  [ -f "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ] || fail "no debug file for $b ($id)"
done
dpkg -r cached-dbgsym >/dev/null

files=$(dpkg -L cached | while read -r f; do [ -f "$f" ] || [ -L "$f" ] && echo "$f"; done)
step "remove: the binaries go, the configuration and the store stay"
dpkg -r cached >/dev/null
for f in /usr/bin/cached /usr/bin/cachectl /usr/lib/cached/cached-variant /usr/lib/systemd/system/cached.service; do [ ! -e "$f" ] || fail "$f is still there"; done
[ -f /etc/cached/cached.conf ] || fail "remove took /etc/cached/cached.conf"
[ "$(find /var/cache/cached/posts -type f | wc -l)" = 100 ] || fail "remove changed the store"

step "purge: the configuration and every file of the package go"
dpkg -P cached >/dev/null
[ ! -e /etc/cached ] || fail "purge left /etc/cached"
left=""
for f in $files; do [ -e "$f" ] || [ -L "$f" ] && left="$left $f"; done
[ -z "$left" ] || fail "purge left:$left"
for f in /etc/systemd/system/sockets.target.wants/cached.socket /etc/systemd/system/multi-user.target.wants/cached.service \
         /var/lib/systemd/deb-systemd-helper-enabled/cached.socket.dsh-also /var/lib/systemd/deb-systemd-helper-masked/cached.socket; do
  [ ! -e "$f" ] && [ ! -L "$f" ] || fail "purge left $f"
done
dpkg -s cached >/dev/null 2>&1 && fail "dpkg still knows cached"
# Kept on purpose (packaging/postrm): the store and the system group.
[ -d /var/cache/cached ] || fail "purge removed the store (it is kept on purpose)"
getent group cached >/dev/null || fail "purge removed the group cached (it is kept on purpose)"
step "install, use, upgrade, remove and purge passed; the store and the group cached stay on purpose (removed now, as this test made them)"
