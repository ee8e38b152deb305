#!/usr/bin/env bash
# The demo behind `make demo`: a bundled origin, the daemon on a temporary
# store and socket, a prefetch with its progress bar, a few reads, then a
# restart with the origin stopped to show that nothing is downloaded again.
set -euo pipefail
bin=${1:?usage: demo.sh BIN_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/cached-demo-XXXXXX)
origin_pid=""; daemon_pid=""

cleanup() {
  [ -n "$daemon_pid" ] && kill -TERM "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
  [ -n "$origin_pid" ] && kill -TERM "$origin_pid" 2>/dev/null && wait "$origin_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "Starting the bundled origin (Examples/origin: 100 posts, 16 image rows)"
python3 "$here/Examples/origin-server.py" --root "$here/Examples/origin" --port-file "$work/port" >"$work/origin.log" 2>&1 &
origin_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(cat "$work/port")
echo "origin on http://127.0.0.1:$port/"

export CACHED_SOCKET="$work/cached.sock"
start_daemon() {
  "$bin/cached" --store "$work/store" --socket "$CACHED_SOCKET" \
    --posts-url "http://127.0.0.1:$port/posts.json" \
    --images-url "http://127.0.0.1:$port/images/manifest.json" 2>>"$work/cached.log" &
  daemon_pid=$!
  for _ in $(seq 200); do "$bin/cachectl" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "cached did not start:"; cat "$work/cached.log"; exit 1
}

step "Starting cached on a temporary store ($work/store)"
start_daemon
run "$bin/cachectl" ping

step "Prefetching everything"
run "$bin/cachectl" prefetch

step "One post"
run "$bin/cachectl" get post 1

step "The head of the post list"
{ "$bin/cachectl" get posts || true; } | head -n 6

step "An image row, and its bytes written to a file"
run "$bin/cachectl" get image 12
run "$bin/cachectl" get image 12 -o "$work/row12.jpg"
file "$work/row12.jpg" 2>/dev/null || ls -l "$work/row12.jpg"

step "Rows 0 and 15 have the same bytes: one object file"
"$bin/cachectl" --json get image 0 | grep -o '"hash":"[0-9a-f]*"'
"$bin/cachectl" --json get image 15 | grep -o '"hash":"[0-9a-f]*"'
echo "object files: $(find "$work/store/objects" -type f | wc -l) for $("$bin/cachectl" --json get images | grep -o '"row":' | wc -l) rows"

step "Status"
run "$bin/cachectl" status

step "Restarting cached with the origin stopped"
kill -TERM "$daemon_pid"; wait "$daemon_pid" || true; daemon_pid=""
kill -TERM "$origin_pid"; wait "$origin_pid" 2>/dev/null || true; origin_pid=""
start_daemon
{ "$bin/cachectl" get post 42 || true; } | head -n 2
"$bin/cachectl" get images | tail -n 4
run "$bin/cachectl" get image 5 -o "$work/row5.png"
downloads=$("$bin/cachectl" --json status | grep -o '"downloads":[0-9]*')
echo "after the restart: $downloads (everything was served from the store)"
[ "$downloads" = '"downloads":0' ] || { echo "unexpected downloads after restart"; exit 1; }

step "Done; stopping everything and removing $work"
