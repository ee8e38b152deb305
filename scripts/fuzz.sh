#!/usr/bin/env bash
# make fuzz: each libFuzzer target for FUZZ_SECONDS seconds, seeded from
# Tests/Fuzz/corpus/TARGET (the working corpus grows under .build/).
# A crash stops the run and leaves its input in .build/fuzz-artifacts/;
# copy it to Tests/Fuzz/regressions/TARGET/ so the corpus replay test keeps it.
set -euo pipefail
bin=${1:?usage: fuzz.sh FUZZ_BINARY SECONDS [TARGET...]}
seconds=${2:-60}
shift 2
targets=${*:-request record feeds config http}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$here/.build/fuzz-artifacts"
export SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0
for t in $targets; do
  corpus="$here/.build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  cp -n "$here/Tests/Fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
  cp -n "$here/Tests/Fuzz/regressions/$t/"* "$corpus/" 2>/dev/null || true
  echo "== fuzz $t for ${seconds}s"
  if ! CACHED_FUZZ_TARGET=$t "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$here/.build/fuzz-artifacts/$t-" "$corpus" > "$here/.build/fuzz-$t.log" 2>&1; then
    tail -40 "$here/.build/fuzz-$t.log"
    echo "fuzz $t: CRASH (input saved under .build/fuzz-artifacts/)"
    exit 1
  fi
  grep -E "^stat::number_of_executed_units|DONE" "$here/.build/fuzz-$t.log" | tail -2
  echo "fuzz $t: no crash"
done
