#!/usr/bin/env bash
# make test's run of Examples/SwiftClient (a separate package on the
# CachedClient library, depending on this one by path): built, then run
# against the demo origin and a daemon on a temporary store. It must print
# the 100 posts and save every image with the origin's exact bytes.
set -euo pipefail
bin=${1:?usage: example-swift.sh BIN_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/cached-example-XXXXXX)
origin_pid=""; daemon_pid=""
cleanup() {
  [ -n "$daemon_pid" ] && kill -TERM "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
  [ -n "$origin_pid" ] && kill -TERM "$origin_pid" 2>/dev/null && wait "$origin_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# (A second try, from scratch: SwiftPM may plan the build of the path
# dependency from a stale description when files were added to or moved in
# it since the last build, and a plain retry can fail the same way.)
if ! swift build --package-path "$here/Examples/SwiftClient" > "$work/build.log" 2>&1; then
  rm -rf "$here/Examples/SwiftClient/.build"
  swift build --package-path "$here/Examples/SwiftClient" 2>&1 | tail -20
fi
example="$(swift build --package-path "$here/Examples/SwiftClient" --show-bin-path)/cached-screens"

python3 "$here/Examples/origin-server.py" --root "$here/Examples/origin" --port-file "$work/port" >"$work/origin.log" 2>&1 &
origin_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(cat "$work/port")
"$bin/cached" --store "$work/store" --socket "$work/cached.sock" \
  --posts-url "http://127.0.0.1:$port/posts.json" --images-url "http://127.0.0.1:$port/images/manifest.json" 2>"$work/cached.log" &
daemon_pid=$!
for _ in $(seq 200); do "$bin/cachectl" --socket "$work/cached.sock" ping >/dev/null 2>&1 && break; sleep 0.05; done

mkdir "$work/images"
"$example" --socket "$work/cached.sock" --prefetch "$work/images" > "$work/out.txt"
fail() { echo "example-swift: $*"; echo "--- its output:"; cat "$work/out.txt"; exit 1; }
grep -q '^POSTS (100)$' "$work/out.txt" || fail "no list of 100 posts"
[ "$(grep -c '^#[0-9]* by user ' "$work/out.txt")" = 100 ] || fail "not 100 post lines"
grep -q '^saved 16 of 16 images' "$work/out.txt" || fail "not every image saved"
# Every saved image is the origin's file for its row.
python3 - "$here/Examples/origin" "$work/images" <<'PY' || fail "a saved image differs from the origin's"
import json, os, sys
origin, saved = sys.argv[1], sys.argv[2]
rows = json.load(open(os.path.join(origin, "images", "manifest.json")))
for i, row in enumerate(rows):
    names = [n for n in os.listdir(saved) if n.split(".")[0] == str(i)]
    assert len(names) == 1, (i, names)
    assert open(os.path.join(saved, names[0]), "rb").read() == open(os.path.join(origin, "images", row["url"]), "rb").read(), i
    thumb = open(os.path.join(saved, "%d-thumb.webp" % i), "rb").read()
    assert thumb[:4] == b"RIFF" and thumb[8:12] == b"WEBP", (i, thumb[:12])
PY
echo "example-swift: Examples/SwiftClient printed 100 posts and saved 16 images, each the origin's bytes, and a WebP thumbnail of each"
