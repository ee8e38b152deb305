#!/bin/sh
# Runs the README's Python client install lines as written (the checkout's
# path for /path/to/cached) in a scratch directory, then checks that the
# venv imports the installed module and that the checkout gained no build
# files. make python-client runs it (issue 24: the README's pip line).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The sh block that starts with the venv line, up to its closing fence.
sed -n '/^python3 -m venv venv$/,/^```$/p' "$top/README.md" | grep -v '^```' | sed "s#/path/to/cached#$top#" > "$scratch/install.sh"
grep -q 'pip install' "$scratch/install.sh" || { echo "readme-pip: no pip install line found in README.md" >&2; exit 1; }
echo "readme-pip: running README.md's lines:"; sed 's/^/  /' "$scratch/install.sh"
# Without -e, as a user's shell runs them: the README's own rm -rf runs even
# when pip fails; its mktemp lands in the scratch directory (TMPDIR), which
# goes in any case. The import below is the check.
(cd "$scratch" && TMPDIR="$scratch" sh install.sh >"$scratch/pip.log" 2>&1) || true
if ! where=$("$scratch/venv/bin/python" -c 'import cached_client; print(cached_client.__file__)' 2>>"$scratch/pip.log"); then
  # pip builds the package with setuptools fetched from PyPI (build
  # isolation), as it does for every user: without PyPI the README's line
  # cannot work anywhere, which is said, not counted as the README's fault.
  if ! curl -fsS -m 15 -o /dev/null https://pypi.org/simple/setuptools/ 2>/dev/null; then
    echo "readme-pip: SKIPPED: PyPI (https://pypi.org) cannot be reached from this machine, and the README's pip line needs it for setuptools" >&2
    exit 0
  fi
  cat "$scratch/pip.log" >&2
  echo "readme-pip: the README's install lines did not install cached_client" >&2
  exit 1
fi
case "$where" in
  "$scratch"/venv/*) echo "readme-pip: ok, installed as $where" ;;
  *) echo "readme-pip: the venv imports cached_client from $where, not from the venv" >&2; exit 1 ;;
esac
left=$(cd "$top" && git status --porcelain --ignored clients/python | grep -E 'build/|egg-info' || true)
[ -z "$left" ] || { echo "readme-pip: the install left files in the checkout: $left" >&2; exit 1; }
