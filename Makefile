# cached: the make targets. On Debian 12 with the Swift toolchain (6.x) on
# PATH, every target installs the Debian packages it is missing (apt-get,
# through sudo when not root), so each works on a fresh machine.
#
# The targets a newcomer uses:
#   make demo      the daemon against a bundled origin: prefetch, show, restart offline
#   make check     build, then the unit and integration tests: the edit-test loop
#   make test      everything CI runs (.ci/run): lint, check-version, make check's
#                  tests, soak, feed shapes, page scale, the client libraries, each
#                  fuzz target for 20 s, the man pages and the Debian package
#   make lint      swift format lint with .swift-format, node --check of the page's script; make format rewrites with the first
#   make bench     cached against Redis, curl, aria2c, nginx... (about 45 minutes)
#   make soak      the daemon at scale, at length (make test runs a short one)
#   make install   PREFIX, DESTDIR, SYSCONFDIR; make deb: the same as a .deb in dist/
# The others, each described where it is defined: unit, integration, interop,
# crash, powerloss, fuzz, sanitize, feed-shapes, browser-scale, clients,
# bench-scale, bench-store, bench-compare, bench-ranges, check-version, check-docs,
# check-package, check-install, release, clean.

SWIFT        ?= swift
BUILD_FLAGS  ?=
PYTHON       ?= /usr/bin/python3
PREFIX       ?= /usr/local
SYSCONFDIR   ?= /etc
DESTDIR      ?=
# The one place the version is set (make check-version: the files that carry it too agree).
VERSION      := $(shell cat VERSION)
# Installed binaries carry the Swift runtime, so they need no toolchain.
STATIC_BUILD := -c release --static-swift-stdlib --scratch-path .build/static

# The Debian packages, each list with what needs it (install_missing below).
# The build (libcurl, libxxhash, libvips, libxml2) and every suite (python3, systemd, FUSE for lazyfs): `deps`, which every build runs first.
DEB_PACKAGES           := libcurl4-openssl-dev libxxhash-dev xxhash libvips-dev libxml2-dev python3 systemd libfuse3-dev fuse3
# The integration tests' real origins and clients (nginx, Caddy, Chromium, Prometheus...), the Python client's tests: check, test, integration, python-client.
TEST_PACKAGES          := nginx-light caddy openssl curl chromium prometheus btrfs-progs libvips-tools strace \
                          python3-pytest python3-venv python3-setuptools python3-wheel
# make interop (InteropTests, which make test skips): Apache, lighttpd and squid besides the test servers.
INTEROP_PACKAGES       := $(TEST_PACKAGES) apache2 lighttpd squid
# make soak (Tests/python/test_soak.py): nginx as the origin, curl, pytest.
SOAK_PACKAGES          := nginx-light curl python3-pytest
# make feed-shapes (Tests/python/test_feed_shapes.py): nginx serves the static feeds (the scripted origins need only python3), pytest.
FEED_SHAPES_PACKAGES   := nginx-light python3-pytest
# make browser-scale (Tests/python/test_page_scale.py): nginx as the origin, headless Chromium, curl, pytest.
BROWSER_SCALE_PACKAGES := nginx-light chromium curl python3-pytest
# make bench and the other bench targets: the peers (Redis, nginx, aria2c, curl, wrk, vipsthumbnail), GNU time, btrfs, perf (a missed goal's profile).
BENCH_PACKAGES         := redis-server redis-tools nginx-light aria2 curl time wrk btrfs-progs libvips-tools linux-perf
# make deb (scripts/package.sh): dpkg-shlibdeps, objcopy and strip, and lintian.
DEB_TOOL_PACKAGES      := dpkg-dev binutils lintian
# make check-package: lintian on the .deb.
LINTIAN_PACKAGES       := lintian

.PHONY: all deps bench-deps build release check test lint format check-version unit integration interop \
        crash lazyfs powerloss fuzz sanitize sanitize-address sanitize-thread soak feed-shapes browser-scale \
        clients python-client example-swift bench bench-scale bench-compare bench-ranges bench-store bench-feeds demo install deb \
        check-docs check-package check-install clean page

all: build

# Installs the Debian packages named in $(1) that are missing (sudo unless root).
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
endef

# Installs the Debian packages the build and the tests need, if missing.
deps:
	$(call install_missing,$(DEB_PACKAGES))

build: deps
	$(SWIFT) build $(BUILD_FLAGS)

release: deps
	$(SWIFT) build -c release $(BUILD_FLAGS)

# The edit-test loop: the build, then the unit and integration tests (all of
# `swift test` but InteropTests), nothing else. make test runs the same first.
check: deps
	$(call install_missing,$(TEST_PACKAGES))
	@date -u +'make check: [%T] build'
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	@date -u +'make check: [%T] swift test'
	$(SWIFT) test --skip-build --skip InteropTests $(BUILD_FLAGS)

# The whole suite, what CI runs: the lint and the version check first (a few
# seconds), make check's unit and integration tests against the built
# binaries, then the short soak, feed shapes and page scale, the client
# libraries, each fuzz target for a short bounded time, the man pages and
# the Debian package.
TEST_FUZZ_SECONDS ?= 20
# Each part prints the time it starts, so a slow CI run says where it went.
test: lint check-version check
	@date -u +'make test: [%T] pytest (soak, feed shapes, page scale)'
	CACHED_BIN_DIR="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)" PAGE_SCALE_OUT=.build/page-scale-test FEED_SHAPES_QUICK=1 \
	  SOAK_ARGS= PAGE_SCALE_POSTS=50000 PAGE_SCALE_ROWS=5000 $(PYTHON) -m pytest -q -p no:cacheprovider --durations=10 Tests/python
	@date -u +'make test: [%T] the client libraries'
	$(MAKE) --no-print-directory clients
	@date -u +'make test: [%T] fuzzing'
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)
	@date -u +'make test: [%T] docs, package, install'
	$(MAKE) --no-print-directory check-docs check-package check-install
	@date -u +'make test: [%T] done'

# swift format (the toolchain's) with .swift-format, every finding an error
# (about 2 s). It checks the rules alone (LINT_FLAGS): the code's line breaks
# and indentation are its own, not swift-format's pretty printer's, whose
# findings no setting turns off; `make lint LINT_FLAGS=` lists those too.
LINT_FLAGS ?= --debug-disable-pretty-print
# The page's script is checked by node (--check: syntax, no run); Debian's nodejs.
lint:
	$(call install_missing,nodejs)
	$(SWIFT) format lint --configuration .swift-format --strict --recursive --parallel $(LINT_FLAGS) Sources Tests
	node --check Sources/CacheDaemon/HTTP/Page/page.js

# After an edit of the page's files (Sources/CacheDaemon/HTTP/Page/): embeds
# them into IndexPageAssets+Body, +Style and +Script.swift (IndexPageAssetsTests fails until then).
page:
	$(PYTHON) scripts/embed-page.py

# Applies the rules' fixes to Sources and Tests, leaving line breaks and
# indentation as written (the same flag as the lint: what it checks, this
# fixes); `make format FORMAT_FLAGS=` also runs the pretty printer, which
# today would reflow about 230 files' hand-aligned continuation lines.
FORMAT_FLAGS ?= --debug-disable-pretty-print
format:
	$(SWIFT) format --configuration .swift-format --in-place --recursive --parallel $(FORMAT_FLAGS) Sources Tests

# VERSION against the files that carry the version too (scripts/check-version.sh).
check-version:
	scripts/check-version.sh

# Builds release, starts the bundled origin and the daemon on a temporary
# store, prefetches, shows the results, restarts offline, cleans up.
demo: release
	@bash scripts/demo.sh "$$($(SWIFT) build -c release --show-bin-path)"

# The daemon at scale with HTTP on (Tests/python/test_soak.py, the pytest
# suite's; its parts in Tests/python/soak.py): make test runs a short one
# (10,000 rows, 50 /events subscribers, 200 pipelining connections, one
# round, 200 connections not reading listings of 21 MB under 32M of
# max-queued-bytes-total, variants of 1,000 rows, a feed of 100,000 posts
# listed, searched and stopped: soak_posts.py); this runs a long one on the
# release build (the feed of SCALE_POSTS posts; SOAK_ARGS the sizes), RSS
# and descriptors checked before and after each part.
SCALE_POSTS ?= 1000000
SOAK_ARGS ?= --rows 20000 --posts 20000 --subscribers 1001 --pipeliners 600 --rounds 3 --variants 10000 --listers 600 --listing-total 256M \
	--tiny-pages 16 --tiny-page-size 2097152 --tiny-limit 1000000 --scale-posts $(SCALE_POSTS)
soak: release
	$(call install_missing,$(SOAK_PACKAGES))
	CACHED_BIN_DIR="$$($(SWIFT) build -c release $(BUILD_FLAGS) --show-bin-path)" SOAK_ARGS="$(SOAK_ARGS)" \
	  $(PYTHON) -m pytest -q -s -p no:cacheprovider Tests/python/test_soak.py

# The feed shapes of issues 23 and 32 (Tests/python/test_feed_shapes.py, the
# pytest suite's; the flows in Tests/python/feed_shapes.py): JSON Feed,
# Mastodon, WordPress, GitHub, GitLab, Discourse, JSON:API, Algolia, an RSS
# blog, a podcast and Atom served by a real nginx; Reddit, Bluesky, Slack,
# Stripe, YouTube, X, Lemmy, HN Search, Contentful, json-server and
# Confluence by scripted origins computing each page from its cursor,
# offset or page number (Tests/Fixtures/feeds/api-origin.py, stdlib Python),
# each shaped as its API documents it. A reference client reads every
# fixture first (-k reference: that alone, no daemon started). Then per feed three
# prefetches read from the origin's log, every post by id, a restart, an
# edit on page 2, the "has more" warning with the paging settings left out;
# then the faults only these shapes make (a repeated cursor, an offset not
# moving on, HTML, XML entity and depth attacks; loops, max-pages, 401s and
# credentials on other hosts are the Swift suite's) and posts-keep = all
# over 20 refreshes of an RSS window. One test per shape and per fault;
# make test runs them with FEED_SHAPES_QUICK=1 (11 posts a feed 5 to a page
# instead of 35 by 10).
feed-shapes: build
	$(call install_missing,$(FEED_SHAPES_PACKAGES))
	CACHED_BIN_DIR="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)" FEED_SHAPES_QUICK= \
	  $(PYTHON) -m pytest -q -s -p no:cacheprovider Tests/python/test_feed_shapes.py

# The page at `/` at the scale of issue 24 (Tests/python/test_page_scale.py,
# the pytest suite's; its measurements in Tests/python/page_scale.py):
# 50,000 posts and 5,000 images from a real nginx, the release build,
# headless Chromium over the DevTools protocol at 1280x800 and 390x844.
# Fails when a first paint takes 1 s or more, a long task over 200 ms, more
# than 200 images are requested at load or the page is over 20,000 px tall;
# prints the figures (-s) and leaves screenshots and report.json in
# .build/page-scale/. make test runs the suite on the debug build (about
# 30 s), after the bounded HTTPPageTests.
PAGE_SCALE_POSTS ?= 50000
PAGE_SCALE_ROWS ?= 5000
browser-scale: deps
	$(call install_missing,$(BROWSER_SCALE_PACKAGES))
	$(SWIFT) build -c release $(BUILD_FLAGS)
	CACHED_BIN_DIR="$$($(SWIFT) build -c release $(BUILD_FLAGS) --show-bin-path)" PAGE_SCALE_OUT=.build/page-scale \
	  PAGE_SCALE_POSTS=$(PAGE_SCALE_POSTS) PAGE_SCALE_ROWS=$(PAGE_SCALE_ROWS) \
	  $(PYTHON) -m pytest -q -s -p no:cacheprovider Tests/python/test_page_scale.py

# The client libraries against the real daemon (built first): the Python
# module's pytest suite from the tree and once more installed with pip into
# a fresh venv, then the README's own install lines run as written
# (scripts/readme-pip.sh: from PyPI's setuptools, as a user's pip does), and
# Examples/SwiftClient (a package depending on this one by path) built and
# run against the demo origin.
clients: python-client example-swift

python-client: deps
	$(call install_missing,$(TEST_PACKAGES))
	$(SWIFT) build $(BUILD_FLAGS)
	CACHED_BIN_DIR="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)" $(PYTHON) -m pytest -q -p no:cacheprovider clients/python/tests
	rm -rf .build/pyvenv clients/python/build clients/python/*.egg-info
	$(PYTHON) -m venv --system-site-packages .build/pyvenv
	.build/pyvenv/bin/pip install -q --no-build-isolation --no-index clients/python 2>&1 | grep -v BetaConfiguration | grep -v 'warnings.warn' || true
	rm -rf clients/python/build clients/python/*.egg-info
	cd .build && CACHED_CLIENT_INSTALLED=1 CACHED_BIN_DIR="$$(cd .. && $(SWIFT) build $(BUILD_FLAGS) --show-bin-path)" \
	  pyvenv/bin/python -c 'import cached_client, sys; sys.exit(0 if "pyvenv" in cached_client.__file__ else "not the installed module")'
	CACHED_CLIENT_INSTALLED=1 CACHED_BIN_DIR="$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)" \
	  .build/pyvenv/bin/python -m pytest -q -p no:cacheprovider clients/python/tests
	sh scripts/readme-pip.sh

example-swift: deps
	$(SWIFT) build $(BUILD_FLAGS)
	scripts/example-swift.sh "$$($(SWIFT) build $(BUILD_FLAGS) --show-bin-path)"

# The unit and integration suites under AddressSanitizer and ThreadSanitizer,
# each in its own build directory (the daemon the integration tests start is
# built with the same sanitizer). See docs/operations.md for what is excluded.
sanitize: sanitize-address sanitize-thread

sanitize-address: deps
	$(SWIFT) build --build-tests --scratch-path .build/asan --sanitize=address
	ASAN_OPTIONS=detect_leaks=0 SWIFT_BACKTRACE=enable=no $(SWIFT) test --skip-build --scratch-path .build/asan --sanitize=address

sanitize-thread: deps
	$(SWIFT) build --build-tests --scratch-path .build/tsan --sanitize=thread
	TSAN_OPTIONS=halt_on_error=1 SWIFT_BACKTRACE=enable=no $(SWIFT) test --skip-build --scratch-path .build/tsan --sanitize=thread

# libFuzzer on the request parser and dispatcher, the log decoder and replay,
# the feed decoders and the config file parser: FUZZ_SECONDS each
# (scripts/fuzz.sh). A separate build directory,
# instrumented for coverage, with AddressSanitizer.
FUZZ_SECONDS ?= 60
FUZZ_BUILD := --scratch-path .build/fuzz --product cached-fuzz --sanitize=fuzzer --sanitize=address \
  -Xswiftc -DFUZZING -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp
fuzz: deps
	$(SWIFT) build $(FUZZ_BUILD)
	scripts/fuzz.sh "$$($(SWIFT) build $(FUZZ_BUILD) --show-bin-path)/cached-fuzz" $(FUZZ_SECONDS)

# The unit tests alone (no IntegrationTests), and the integration tests alone
# (InteropTests aside): make check runs both.
unit: deps
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	$(SWIFT) test --skip-build --skip IntegrationTests $(BUILD_FLAGS)

integration: deps
	$(call install_missing,$(TEST_PACKAGES))
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	$(SWIFT) test --skip-build --filter IntegrationTests --skip InteropTests $(BUILD_FLAGS)

# Apache (mod_deflate), lighttpd and squid (a forward proxy) as well as
# nginx and Caddy: the same refreshes against each, read from their logs.
interop: deps
	$(call install_missing,$(INTEROP_PACKAGES))
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	$(SWIFT) test --skip-build --filter 'InteropTests|RealOriginTests' $(BUILD_FLAGS)

# The kill -9 suite at length: CRASH_ROUNDS rounds per scenario (make test runs 14).
CRASH_ROUNDS ?= 150
crash: deps
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	CACHED_CRASH_ROUNDS=$(CRASH_ROUNDS) $(SWIFT) test --skip-build --filter 'CrashTests|DamagedLogTests' $(BUILD_FLAGS)

# The power-loss suite at length: POWERLOSS_ROUNDS power losses over six loads
# (make test runs 12), the store on lazyfs (Tests/Fixtures/lazyfs), a FUSE
# file system that drops what was not fsynced. The tests also build lazyfs
# on demand (FUSE is in DEB_PACKAGES).
POWERLOSS_ROUNDS ?= 120
lazyfs: .build/lazyfs
.build/lazyfs: Tests/Fixtures/lazyfs/lazyfs.c | deps
	@mkdir -p .build
	cc -O2 -Wall -Wextra -o $@ $< $$(pkg-config --cflags --libs fuse3)
powerloss: deps lazyfs
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	CACHED_POWERLOSS_ROUNDS=$(POWERLOSS_ROUNDS) $(SWIFT) test --skip-build --filter PowerLossTests $(BUILD_FLAGS)

# cached against Redis (the same client, the same answer bytes), curl and
# aria2c (prefetch from nginx), plain file reads and cat (open, read; the
# store on the scratch file system and on a btrfs loop mount the bench makes,
# which needs root: without it those rows say "not measured"), redis-cli
# (cachectl per call), and at scale (SCALE_POSTS posts against Redis, SQLite
# and the files floor: bench-scale below); medians of BENCH_RUNS rotated rounds;
# writes bench/results.md (about 45 minutes). A benchmark: it prints figures
# and asserts nothing. docs/performance.md says how each is compared.
BENCH_RUNS ?= 5
bench-deps:
	$(call install_missing,$(BENCH_PACKAGES))

bench: release bench-deps
	python3 scripts/bench.py "$$($(SWIFT) build -c release --show-bin-path)" --runs $(BENCH_RUNS) --scale-posts $(SCALE_POSTS)

# make bench's scale-posts section alone (scripts/benchscale.py, issue 34):
# one bare JSON array of SCALE_POSTS posts from nginx with gzip; cached's
# memory against Redis holding the same bytes, its prefetch against SQLite's
# ingest and the files floor, restart, first search, SIGTERM during the
# start's pass, `cachectl get posts`; a missed goal's profile below the
# table. Writes bench/results-scale.md (about 15 minutes at 1,000,000).
bench-scale: release bench-deps
	python3 scripts/bench.py "$$($(SWIFT) build -c release --show-bin-path)" --only scale-posts --runs $(BENCH_RUNS) \
	  --scale-posts $(SCALE_POSTS) --output bench/results-scale.md

# This tree against BENCH_BASE (a commit), A/B interleaved in one run with
# the same client (scripts/bench-compare.py): the regression check of a change.
BENCH_BASE ?= 7709884
bench-compare: release bench-deps
	rm -rf .build/bench-base; git worktree prune
	git worktree add --force --detach .build/bench-base $(BENCH_BASE)
	cd .build/bench-base && $(SWIFT) build -c release
	python3 scripts/bench-compare.py .build/bench-base/.build/release "$$($(SWIFT) build -c release --show-bin-path)" --runs $(BENCH_RUNS)
	git worktree remove --force .build/bench-base

# HTTP ranges of a 64 MiB object (1 byte, 1 MiB; whole GETs for reference)
# against a build of RANGES_BASE, the commit before chunk digests, which
# hashed the whole object for any range: A/B interleaved, the same wrk
# (scripts/bench-ranges.py; docs/performance.md, "Ranges").
RANGES_BASE ?= f3ab24b
bench-ranges: release bench-deps
	rm -rf .build/ranges-base; git worktree prune
	git worktree add --force --detach .build/ranges-base $(RANGES_BASE)
	cd .build/ranges-base && $(SWIFT) build -c release
	python3 scripts/bench-ranges.py "$$($(SWIFT) build -c release --show-bin-path)" --base .build/ranges-base/.build/release --runs $(BENCH_RUNS)
	git worktree remove --force .build/ranges-base

# Replay time and resident memory for a log of REPLAY_RECORDS records (a benchmark, not a test).
REPLAY_RECORDS ?= 1000000
# Memory and time of the feed paths (scripts/bench-feeds.py): the same
# 100,000 posts as one JSON array, 10,000 Link pages, 10,000 cursor pages
# and one RSS document of about 50 MB, each on a fresh store, medians.
BENCH_FEEDS_ARGS ?= --posts 100000 --runs 3
bench-feeds: release
	$(PYTHON) scripts/bench-feeds.py "$$($(SWIFT) build -c release --show-bin-path)" $(BENCH_FEEDS_ARGS)

bench-store: release
	"$$($(SWIFT) build -c release --show-bin-path)/cached-bench" replay $(REPLAY_RECORDS) \
	  --daemon "$$($(SWIFT) build -c release --show-bin-path)/cached"

# Binaries, units, man pages, completion, docs and an example configuration,
# under $(DESTDIR)$(PREFIX) (and $(DESTDIR)$(SYSCONFDIR)/cached).
install: deps
	$(SWIFT) build $(STATIC_BUILD) --product cached
	$(SWIFT) build $(STATIC_BUILD) --product cachectl
	$(SWIFT) build $(STATIC_BUILD) --product cached-variant
	bin="$$($(SWIFT) build $(STATIC_BUILD) --show-bin-path)"; \
	install -D -m 0755 "$$bin/cached" "$(DESTDIR)$(PREFIX)/bin/cached"; \
	install -D -m 0755 "$$bin/cachectl" "$(DESTDIR)$(PREFIX)/bin/cachectl"; \
	install -D -m 0755 "$$bin/cached-variant" "$(DESTDIR)$(PREFIX)/lib/cached/cached-variant"
	for u in cached.service cached.socket cached-http.socket cached-prefetch.service cached-prefetch.timer \
	         cached@.service cached@.socket cached-prefetch@.service cached-prefetch@.timer; do \
	  install -d "$(DESTDIR)$(PREFIX)/lib/systemd/system"; \
	  sed 's#/usr/local/bin#$(PREFIX)/bin#g' systemd/$$u > "$(DESTDIR)$(PREFIX)/lib/systemd/system/$$u"; \
	  chmod 0644 "$(DESTDIR)$(PREFIX)/lib/systemd/system/$$u"; done
	install -d "$(DESTDIR)$(PREFIX)/share/man/man8" "$(DESTDIR)$(PREFIX)/share/man/man1"
	gzip -9n < docs/cached.8 > "$(DESTDIR)$(PREFIX)/share/man/man8/cached.8.gz"
	gzip -9n < docs/cachectl.1 > "$(DESTDIR)$(PREFIX)/share/man/man1/cachectl.1.gz"
	install -D -m 0644 completions/cachectl.bash "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/cachectl"
	install -d "$(DESTDIR)$(PREFIX)/share/doc/cached" "$(DESTDIR)$(PREFIX)/share/lintian/overrides"
	install -m 0644 README.md docs/protocol.md docs/http.md docs/storage-format.md docs/operations.md docs/performance.md packaging/copyright "$(DESTDIR)$(PREFIX)/share/doc/cached/"
	gzip -9n < packaging/changelog > "$(DESTDIR)$(PREFIX)/share/doc/cached/changelog.gz"
	install -m 0644 packaging/lintian-overrides "$(DESTDIR)$(PREFIX)/share/lintian/overrides/cached"
	install -d "$(DESTDIR)$(SYSCONFDIR)/cached"
	[ -e "$(DESTDIR)$(SYSCONFDIR)/cached/cached.conf" ] || install -m 0644 Examples/cached.conf "$(DESTDIR)$(SYSCONFDIR)/cached/cached.conf"

# A .deb of the same files (PREFIX=/usr) in dist/.
deb:
	$(call install_missing,$(DEB_TOOL_PACKAGES))
	rm -rf .build/deb-stage
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/.build/deb-stage PREFIX=/usr SYSCONFDIR=/etc
	scripts/package.sh .build/deb-stage dist $(VERSION)

# The man pages render without warnings.
check-docs:
	@for m in docs/cached.8 docs/cachectl.1; do \
	  out=$$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l $$m 2>&1 >/dev/null); \
	  if [ -n "$$out" ]; then echo "$$m: $$out"; exit 1; fi; done; echo "check-docs: man pages render without warnings"

# The .deb builds and holds exactly what make install installs.
check-package: deb
	rm -rf .build/install-check
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/.build/install-check PREFIX=/usr SYSCONFDIR=/etc
	(cd .build/install-check && find . -type f | sed 's#^\./#/#' | sort) > .build/install-files.txt
	dpkg-deb -c dist/cached_$(VERSION)_$$(dpkg --print-architecture).deb | awk '$$1 !~ /^d/ {print $$NF}' | sed 's#^\./#/#' | sort > .build/deb-files.txt
	diff -u .build/install-files.txt .build/deb-files.txt
	dpkg-deb -I dist/cached_$(VERSION)_$$(dpkg --print-architecture).deb | grep -q "Package: cached"
	@echo "check-package: the .deb holds the $$(wc -l < .build/install-files.txt) files make install installs"
	$(call install_missing,$(LINTIAN_PACKAGES))
	lintian --fail-on error,warning dist/cached_$(VERSION)_$$(dpkg --print-architecture).deb
	@echo "check-package: lintian reports no error and no warning"

# The whole life of the package on this machine's dpkg, as root (make test
# runs it): install, use, upgrade from the previous build, remove, purge;
# the machine left as it was (scripts/check-install.sh).
check-install: deb
	scripts/check-install.sh dist

clean:
	$(SWIFT) package clean
