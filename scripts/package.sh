#!/usr/bin/env bash
# make deb: a Debian package of what `make install` installs (PREFIX=/usr),
# built with dpkg-deb as Debian's helpers would: binaries stripped with
# their debug symbols in a separate cached-dbgsym package (by build id),
# Depends computed by dpkg-shlibdeps, systemd units handled with
# deb-systemd-helper and deb-systemd-invoke, a copyright file and a
# changelog. Usage: package.sh STAGE_DIR OUT_DIR VERSION
set -euo pipefail
stage=${1:?stage dir}; out=${2:?output dir}; version=${3:?version}
here=$(cd "$(dirname "$0")/.." && pwd)
arch=$(dpkg --print-architecture)
mkdir -p "$out"
stage=$(cd "$stage" && pwd); out=$(cd "$out" && pwd)
maintainer="cached developers <maintainers@cached-project.org>"
work=$(mktemp -d /tmp/cached-package-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$stage/DEBIAN" "$out"
rm -f "$out"/cached_*.deb "$out"/cached-dbgsym_*.deb

# Debug symbols into cached-dbgsym, by build id; the binaries stripped.
dbg="$work/dbgsym"
build_ids=""
for bin in "$stage/usr/bin/"* "$stage/usr/lib/cached/"*; do
  id=$(readelf -n "$bin" | awk '/Build ID:/ {print $3}')
  [ -n "$id" ] || { echo "package.sh: $bin has no build id"; exit 1; }
  mkdir -p "$dbg/usr/lib/debug/.build-id/${id:0:2}"
  objcopy --only-keep-debug --compress-debug-sections "$bin" "$dbg/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
  chmod 0644 "$dbg/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
  strip --remove-section=.comment --remove-section=.note --strip-unneeded "$bin"
  build_ids="$build_ids $id"
done

# Depends, from the libraries the binaries link (with their versions).
mkdir -p "$work/shlibs/debian"
printf 'Source: cached\n\nPackage: cached\nArchitecture: any\n' > "$work/shlibs/debian/control"
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$stage/usr/bin/"* "$stage/usr/lib/cached/"* 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "package.sh: dpkg-shlibdeps found no dependencies"; exit 1; }

size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: cached
Version: $version
Architecture: $arch
Maintainer: $maintainer
Depends: $shlibs, adduser, init-system-helpers (>= 1.54~)
Installed-Size: $size
Section: net
Priority: optional
Homepage: https://github.com/cached-project/cached
Description: durable local cache of a JSON posts feed and its images
 cached keeps a durable, content-addressed local copy of a remote JSON feed
 of posts and of the images of a manifest, and serves it to local programs
 over a Unix socket and HTTP; cachectl is its command-line client.
CONTROL
echo /etc/cached/cached.conf > "$stage/DEBIAN/conffiles"
install -m 0755 "$here/packaging/postinst" "$here/packaging/prerm" "$here/packaging/postrm" "$stage/DEBIAN/"

mkdir -p "$dbg/DEBIAN" "$dbg/usr/share/doc"
ln -s cached "$dbg/usr/share/doc/cached-dbgsym"
cat > "$dbg/DEBIAN/control" <<CONTROL
Package: cached-dbgsym
Source: cached
Version: $version
Auto-Built-Package: debug-symbols
Architecture: $arch
Maintainer: $maintainer
Depends: cached (= $version)
Installed-Size: $(du -sk --exclude=DEBIAN "$dbg" | cut -f1)
Section: debug
Priority: optional
Description: debug symbols for cached
Build-Ids:$build_ids
CONTROL

for root in "$stage" "$dbg"; do
  (cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
done
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out/cached_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$dbg" "$out/cached-dbgsym_${version}_${arch}.deb"
