#!/bin/bash
# scripts/bench-stop.sh BIN_DIR FEED_URL DELAY
#
# How long SIGTERM takes while a posts refresh runs: starts BIN_DIR/cached on
# a fresh store under $TMPDIR with posts-url FEED_URL, waits for `ping`,
# starts `cachectl prefetch posts` in the background, sends SIGTERM DELAY
# seconds later and prints the seconds from the signal to the daemon's exit,
# its exit status, whether it logged `workers still busy at exit` and what it
# said of the page it was reading. A benchmark: it prints, asserts nothing.
# (docs/performance.md, "The start's passes and SIGTERM".)
set -u
BIN=$1 FEED=$2 DELAY=$3
D=$(mktemp -d "${TMPDIR:-/tmp}/cached-stop-XXXXXX")
trap 'rm -rf "$D"' EXIT
"$BIN/cached" --config /dev/null --store "$D/store" --socket "$D/s" --posts-url "$FEED" --log-level info 2> "$D/log" &
P=$!
for _ in $(seq 1 200); do "$BIN/cachectl" --socket "$D/s" ping > /dev/null 2>&1 && break; sleep 0.05; done
"$BIN/cachectl" --socket "$D/s" --timeout 0 prefetch posts > "$D/prefetch.out" 2>&1 &
sleep "$DELAY"
T0=$(date +%s.%N)
kill -TERM "$P"
wait "$P"
RC=$?
T1=$(date +%s.%N)
wait
echo "$BIN $FEED, SIGTERM after $DELAY s: exit $RC $(echo "$T1 - $T0" | bc) s after it;" \
     "$(grep -c 'still busy at exit' "$D/log") 'workers still busy';" \
     "$(grep -o 'the page was not read to its end[^;]*' "$D/log" | head -1)"
