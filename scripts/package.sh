#!/usr/bin/env bash
# make deb: a Debian package of what `make install` installs (PREFIX=/usr),
# built with dpkg-deb. Usage: package.sh STAGE_DIR OUT_DIR VERSION
set -euo pipefail
stage=${1:?stage dir}; out=${2:?output dir}; version=${3:?version}
arch=$(dpkg --print-architecture)
mkdir -p "$stage/DEBIAN" "$out"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: cached
Version: $version
Architecture: $arch
Maintainer: cached developers <cached@localhost>
Depends: libc6, libcurl4, libxxhash0, libstdc++6, libgcc-s1
Installed-Size: $size
Section: net
Priority: optional
Description: durable local cache of a JSON posts feed and its images
 cached keeps a durable, content-addressed local copy of a remote JSON feed
 of posts and of the images of a manifest, and serves it to local programs
 over a Unix socket; cachectl is its command-line client.
CONTROL
echo /etc/cached/cached.conf > "$stage/DEBIAN/conffiles"
cat > "$stage/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    # Clients in group "cached" may use the socket (mode 0660).
    getent group cached >/dev/null || addgroup --system cached >/dev/null
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload >/dev/null || true
        systemctl try-restart cached.service >/dev/null || true
    fi
fi
POSTINST
cat > "$stage/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
    systemctl stop cached-prefetch.timer cached.service cached.socket cached-http.socket >/dev/null 2>&1 || true
fi
PRERM
cat > "$stage/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null || true; fi
POSTRM
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
dpkg-deb --root-owner-group --build "$stage" "$out/cached_${version}_${arch}.deb"
