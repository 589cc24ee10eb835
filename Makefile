# libappnorth: build, package, test and demo.
#   make demo      build the library, start the local server, run the C examples and
#                  the C++, Go, Rust, C#, Java, LuaJIT, Ruby and Node ones whose toolchain works
#   make test      every suite: swift test, the C tests, pytest (server started here),
#                  with one short round of each campaign (forks, kill -9, exits)
#   make test-soak make test with every campaign at its full count (APPNORTH_SOAK=1)
#   make dist      self-contained stripped libappnorth.so, headers, pkg-config and CMake
#                  packages, the ABI as JSON and a LuaJIT/cffi cdef, in dist/ (relocatable)
#   make wheel     the Python wheel (libappnorth.so and its libraries inside) in dist/
#   make node-package  the npm tarballs (appnorth: JS; @appnorth/linux-x64-gnu: addon + .so) in build/node/
#   make deb       the Debian packages libappnorth0 and libappnorth-dev in dist/
#   make install   PREFIX=/usr/local by default
#   make fuzz      libFuzzer harnesses (Swift, ASan) for FUZZ_SECONDS each; never part of test/dist

VERSION      := 0.4.0
SOVERSION    := 0
PREFIX       ?= /usr/local
DIST         := dist
BUILD        := build
CC           ?= cc
SWIFT        ?= swift
LIBNAME      := libappnorth.so
SONAME       := $(LIBNAME).$(SOVERSION)
REALNAME     := $(LIBNAME).$(VERSION)
DIST_LIB     := $(DIST)/lib/$(REALNAME)
TOOLCHAIN    := $(shell dirname $$(dirname $$(readlink -f $$(command -v swiftc 2>/dev/null || echo /opt/swift/usr/bin/swiftc))))
SWIFT_SOURCES := $(shell find Sources include -type f) Package.swift
CFLAGS       ?= -O1 -g -Wall -Wextra -Werror
DIST_CFLAGS  := -I$(DIST)/include
DIST_LDFLAGS := -L$(DIST)/lib -lappnorth -Wl,-rpath,$(abspath $(DIST)/lib)
VENV         := .venv
PYTEST       := $(VENV)/bin/pytest
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: all deps build dist install uninstall examples demo test test-size test-docs test-swift test-c test-fleet test-valgrind \
        test-python test-hosts test-wheel test-platforms test-frame-loop test-swift-example wheel check-dist bench sanitize fuzz clean \
        node-package test-node test-soak

all: dist

deps:
	@scripts/ensure-deps.sh

build: deps
	$(SWIFT) build

# --- Release packaging ------------------------------------------------------
# Static Swift runtime, only appnorth_* exported, SONAME with the major
# version, stripped. Static linking stays out of Package.swift: it breaks
# `swift test`. Compiled and linked against the Debian 11 root
# (scripts/build-release.sh), so it needs nothing newer than glibc 2.31
# (scripts/check-floor.sh; docs/platforms.md).
PACKAGE_FILES := scripts/build-release.sh scripts/floor-shims.c scripts/platform-roots.sh scripts/appnorth.pc.in scripts/cmake/appnorthConfig.cmake.in \
                 scripts/cmake/appnorthConfigVersion.cmake.in scripts/cffi-cdef.sh \
                 scripts/abi-json.py scripts/abi_rules.py scripts/version-script.py
SUBST        := sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@SOVERSION@|$(SOVERSION)|g' -e 's|@MAJOR@|$(firstword $(subst ., ,$(VERSION)))|g'

$(DIST_LIB): $(SWIFT_SOURCES) abi/appnorth.symbols $(PACKAGE_FILES)
	@scripts/ensure-deps.sh
	mkdir -p $(DIST)/lib/pkgconfig $(DIST)/lib/cmake/appnorth $(DIST)/include $(DIST)/share/appnorth
	strip --strip-unneeded -o $@ "$$(scripts/build-release.sh $(SONAME))"
	@scripts/check-floor.sh $@
	ln -sf $(REALNAME) $(DIST)/lib/$(SONAME)
	ln -sf $(SONAME) $(DIST)/lib/$(LIBNAME)
	cp include/appnorth.h include/appnorth.hpp $(DIST)/include/
	$(SUBST) scripts/appnorth.pc.in > $(DIST)/lib/pkgconfig/appnorth.pc
	$(SUBST) scripts/cmake/appnorthConfig.cmake.in > $(DIST)/lib/cmake/appnorth/appnorthConfig.cmake
	$(SUBST) scripts/cmake/appnorthConfigVersion.cmake.in > $(DIST)/lib/cmake/appnorth/appnorthConfigVersion.cmake
	scripts/cffi-cdef.sh include/appnorth.h > $(DIST)/share/appnorth/appnorth.cdef
	python3 scripts/abi-json.py include/appnorth.h > $(DIST)/share/appnorth/appnorth.api.json
	@echo "dist: $@ is $$(stat -c %s $@) bytes"

dist: $(DIST_LIB) $(DIST)/share/man/man3/appnorth.3

# One man page per function of the header and appnorth(3), from its doc
# comments (scripts/man-pages.py; its --test lints them in test-hosts).
MAN_PAGES := share/man/man3/appnorth.3 $(patsubst %,share/man/man3/%.3,$(shell grep -oP 'appnorth_\w+(?=\x28)' abi/appnorth.symbols))
$(DIST)/share/man/man3/appnorth.3: include/appnorth.h abi/appnorth.symbols scripts/man-pages.py
	python3 scripts/man-pages.py $(dir $@)

# The Python wheel with libappnorth.so inside, its non-manylinux
# dependencies bundled by auditwheel: dist/appnorth-VERSION-py3-none-manylinux_*.whl
wheel: $(DIST_LIB)
	@scripts/make-wheel.sh $(DIST_LIB) $(DIST)

# The npm packages, packed by npm pack: build/node/appnorth-VERSION.tgz (the
# JS module, no binary) and build/node/appnorth-linux-x64-gnu-VERSION.tgz
# (the Node-API addon, bindings/node/src, with libappnorth.so.0 beside it,
# $ORIGIN rpath), which the first names in its optionalDependencies.
node-package: $(DIST_LIB)
	@scripts/node-package.sh $(DIST) $(BUILD)/node

# The Debian packages libappnorth0 and libappnorth-dev (dist/*.deb) from the
# release build, with Debian's paths in the .pc and CMake files; Depends from
# dpkg-shlibdeps against the Debian 11 root's packages, a symbols file checked
# by dpkg-gensymbols, then lintian must report no error or warning
# (scripts/make-deb.sh). make test-platforms installs and uses them.
.PHONY: deb
deb: dist
	@scripts/ensure-deps.sh
	@scripts/make-deb.sh $(DIST) $(VERSION)

# dist/ is relocatable, so installing is copying it.
INSTALLED := lib/$(REALNAME) lib/pkgconfig/appnorth.pc lib/cmake/appnorth/appnorthConfig.cmake \
             lib/cmake/appnorth/appnorthConfigVersion.cmake include/appnorth.h include/appnorth.hpp \
             share/appnorth/appnorth.cdef share/appnorth/appnorth.api.json $(MAN_PAGES)
install: dist
	install -d $(PREFIX)/lib/pkgconfig $(PREFIX)/lib/cmake/appnorth $(PREFIX)/include $(PREFIX)/share/appnorth $(PREFIX)/share/man/man3
	install -m 0755 $(DIST_LIB) $(PREFIX)/lib/$(REALNAME)
	ln -sf $(REALNAME) $(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(PREFIX)/lib/$(LIBNAME)
	for f in $(filter-out lib/$(REALNAME),$(INSTALLED)); do install -m 0644 $(DIST)/$$f $(PREFIX)/$$f || exit 1; done

uninstall:
	rm -f $(addprefix $(PREFIX)/,$(INSTALLED)) $(PREFIX)/lib/$(SONAME) $(PREFIX)/lib/$(LIBNAME)

# --- Examples -----------------------------------------------------------------
EXAMPLES := $(patsubst examples/c/%.c,$(BUILD)/examples/%,$(wildcard examples/c/*.c))

$(BUILD)/examples/%: examples/c/%.c $(wildcard examples/c/*.h) $(DIST_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DIST_CFLAGS) -o $@ $< $(DIST_LDFLAGS) $$(pkg-config --libs jansson libcurl) -lpthread

examples: $(EXAMPLES)

demo: examples
	@DEVSERVER_FLAGS=--seed-demo scripts/with-devserver.sh \
	    sh -c 'scripts/run-demo.sh $(BUILD)/examples && scripts/run-host-examples.sh $(BUILD) $(DIST) \
	           && APPNORTH_LIBRARY=$(abspath $(DIST_LIB)) PYTHONPATH=bindings/python examples/python/run.sh'

# --- Tests ------------------------------------------------------------------------
C_TESTS := $(patsubst Tests/c/%.c,$(BUILD)/tests/%,$(wildcard Tests/c/test_*.c))

# The build lines of the C tests live in scripts/build-c-test.sh (shared
# with scripts/sanitize.sh; test_dlclose is linked without -lappnorth).
$(BUILD)/tests/%: Tests/c/%.c $(wildcard Tests/c/*.h) $(DIST_LIB) scripts/build-c-test.sh
	@mkdir -p $(dir $@)
	CC='$(CC)' CFLAGS='$(CFLAGS) $(DIST_CFLAGS)' scripts/build-c-test.sh $@ $< $(abspath $(DIST)/lib)

$(PYTEST): bindings/python/requirements-test.txt
	@scripts/ensure-deps.sh --python
	@touch $@

# make test keeps one honest round of every campaign, short: 20 + 50 C
# forks, 20 kill -9 rounds, 20 Ruby exits, a 40-install fleet, valgrind,
# both platform roots with 1 kill -9 round each (about 8 minutes on 2 cores).
# make test-soak is make test with APPNORTH_SOAK=1, which every campaign
# reads (Tests/c/check.h test_count, the Python tests' campaign(), the
# scripts) for its full count: 200 + 500 C forks and 200 Python ones, 200
# kill -9 rounds, 200 Ruby exits, a 100-install fleet, 3 kill -9 rounds per
# root. A change to fork, exit, limits or threads gives its result.
test-soak:
	@APPNORTH_SOAK=1 $(MAKE) --no-print-directory test

test: deps $(PYTEST)
	$(MAKE) --no-print-directory test-size
	$(MAKE) --no-print-directory test-docs
	$(MAKE) --no-print-directory test-swift
	$(MAKE) --no-print-directory test-swift-example
	$(MAKE) --no-print-directory check-dist
	$(MAKE) --no-print-directory test-c
	$(MAKE) --no-print-directory test-frame-loop
	$(MAKE) --no-print-directory test-fleet
	$(MAKE) --no-print-directory test-valgrind
	$(MAKE) --no-print-directory test-python
	$(MAKE) --no-print-directory test-hosts
	$(MAKE) --no-print-directory test-wheel
	$(MAKE) --no-print-directory test-node
	$(MAKE) --no-print-directory test-platforms

# The size gate (curl's complexity gate as the model): no Swift file in
# Sources/ over 500 lines, no function over 80, no type (over all its
# extensions) over 500; scripts/size-baseline.txt lists what was over when
# the gate came, and may only shrink. The toolkit gate: every lock, thread
# and process-wide object of the library goes through Lock, LibraryThread
# and ForkLocal (scripts/check-toolkit.py, with its self-test: every
# spelling of process-wide state); every lock's class is declared
# beside its owner, once, and used (scripts/lock_classes.py, with its
# self-test). The layering gate: Transport/
# names no type of Engine/, Transport/ and Engine/ none of Async/, and only
# Async/ names Engine/'s types (scripts/check-layers.py, with its self-test).
# The clock gate: Tests/c reads clocks through Tests/c/clock.h only (no
# time(), CLOCK_REALTIME or pthread_cond_timedwait elsewhere;
# scripts/check-test-clock.py, with its self-test). The tests' size gate:
# no file under Tests/ over 600 lines, no function over 60, but those in
# scripts/test-size-baseline.txt, which may only shrink (check-test-size.py).
test-size:
	@python3 scripts/check-size.py
	@python3 scripts/check-test-size.py --self-test
	@python3 scripts/check-test-size.py
	@python3 scripts/check-toolkit.py --self-test
	@python3 scripts/check-toolkit.py
	@python3 scripts/lock_classes.py --self-test
	@python3 scripts/lock_classes.py
	@python3 scripts/check-layers.py --self-test
	@python3 scripts/check-layers.py
	@python3 scripts/check-test-clock.py --self-test
	@python3 scripts/check-test-clock.py

# The docs gate: docs/architecture.md names every folder of Sources/ and
# every library thread, and its lock classes table is the code's
# (scripts/lock_classes.py); file, folder
# and Type.member references in docs/ and README.md resolve; CHANGELOG.md
# names every function of abi/appnorth.symbols; no heading repeats; the
# README's layout and docs/CONVENTIONS.md name every folder of the core.
test-docs:
	@python3 scripts/check-docs.py

# swift test in two processes at a time, each test in a process of its own
# with a dev server of its own (TestServer.swift takes one by flock);
# TLSTests share the one HTTPS server, forward proxy and h2 front, whose logs
# they read, so they run after, alone.
SWIFT_WORKERS ?= 2
test-swift:
	$(SWIFT) build --build-tests
	DEVSERVER_TLS=1 DEVSERVER_COUNT=$(SWIFT_WORKERS) scripts/with-devserver.sh sh -c \
	    '$(SWIFT) test --skip-build --parallel --num-workers $(SWIFT_WORKERS) --skip TLSTests && \
	     $(SWIFT) test --skip-build --filter TLSTests'

# The Swift example package (examples/swift) depends on this package by
# path, as an app would. Built into its own folder (incremental after the
# first time; warnings are errors there, so the AppNorth products stay
# warning-free under Swift 6) and run against the dev server. SwiftPM does
# not notice a source file deleted from a path dependency ("missing
# inputs"), so a failed incremental build is retried once from scratch.
SWIFT_EXAMPLE := $(BUILD)/swift-example
SWIFT_EXAMPLE_BUILD := $(SWIFT) build --package-path examples/swift --scratch-path $(SWIFT_EXAMPLE) -Xswiftc -warnings-as-errors
test-swift-example:
	@mkdir -p $(BUILD)
	@$(SWIFT_EXAMPLE_BUILD) > $(BUILD)/swift-example-build.log 2>&1 \
	    || { echo "swift example: incremental build failed; building from scratch"; rm -rf $(SWIFT_EXAMPLE); $(SWIFT_EXAMPLE_BUILD); }
	@scripts/with-devserver.sh sh -c '$(SWIFT_EXAMPLE)/debug/AppDNAExample "$$APPNORTH_TEST_SERVER"' \
	    > $(BUILD)/swift-example.log 2>&1 || { cat $(BUILD)/swift-example.log; exit 1; }
	@echo "swift example: $$(tail -n 1 $(BUILD)/swift-example.log)"

# A fresh venv from the wheel imports appnorth from any folder with no
# environment variable (system jansson/curl/sqlite hidden when root) and runs
# the README's Python quickstart against the seeded server.
test-wheel: wheel
	@DEVSERVER_FLAGS=--seed-demo scripts/with-devserver.sh scripts/test-wheel.sh

# The platform floor (docs/platforms.md): no file in dist/ or in the wheel
# needs a symbol newer than glibc 2.31 (scripts/check-floor.sh); then in a
# Debian 11 and a Debian 13 root (debootstrap, cached in
# /var/cache/appnorth/roots) the C quickstart and examples, the wheel, its
# fallbacks and a kill -9 round run, and the Debian packages install and
# build the C quickstart there and here (scripts/test-platforms.sh).
test-platforms: wheel deb
	@scripts/check-floor.sh $(DIST_LIB) $(DIST)/appnorth-*.whl | grep -E 'appnorth|OVER' || true
	@scripts/check-floor.sh $(DIST_LIB) $(DIST)/appnorth-*.whl > /dev/null
	@DEVSERVER_FLAGS=--seed-demo scripts/with-devserver.sh scripts/test-platforms.sh

# The single-threaded frame-loop example (dispatch mode): every callback on
# the main thread, live config received (examples/c/frame_loop.c).
test-frame-loop: $(BUILD)/examples/frame_loop
	@scripts/with-devserver.sh sh -c '$(BUILD)/examples/frame_loop "$$APPNORTH_TEST_SERVER" frame-loop' \
	    > $(BUILD)/frame-loop.log 2>&1 || { cat $(BUILD)/frame-loop.log; exit 1; }
	@echo "frame loop example: $$(tail -n 1 $(BUILD)/frame-loop.log)"

# Runs every C test program through the real .so, two at a time, each lane
# with its own dev server (scripts/run-c-tests.sh); one summary line.
# APPNORTH_LOCK_ORDER=1 (here, in test-python and test-fleet): the release
# library checks the lock order on every acquisition and aborts, naming
# both locks, on a violation (Support/LockOrder.swift).
# TEST='name,prefix*' runs only those tests (the RUN() lines of each main()),
# or whole programs named so: make test-c TEST=test_live_updates
test-c: $(C_TESTS) $(BUILD)/tests/harness_selftest
	@[ -n '$(TEST)' ] || Tests/harness/check.sh $(BUILD)/tests/harness_selftest
	@APPNORTH_LOCK_ORDER=1 APPNORTH_TEST='$(TEST)' scripts/run-c-tests.sh $(C_TESTS)

$(BUILD)/tests/harness_selftest: Tests/harness/harness_selftest.c Tests/c/check.h Tests/c/support.h $(DIST_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DIST_CFLAGS) -o $@ $< $(DIST_LDFLAGS)

# 40 installs (100 in make test-soak; 2 processes) recovering from an outage
# of the dev server, once with the shipped jitter and once without: every
# queued event stored exactly once, every Retry-After waited out, jitter
# spreads the stream reconnects (Tests/fleet/fleet.py; about 30 s). make
# bench runs 500.
$(BUILD)/tests/fleet_client: Tests/fleet/fleet_client.c $(DIST_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DIST_CFLAGS) -o $@ $< $(DIST_LDFLAGS) -lpthread

test-fleet: $(BUILD)/tests/fleet_client
	@APPNORTH_LOCK_ORDER=1 python3 Tests/fleet/fleet.py --client $(BUILD)/tests/fleet_client --profile test --check

# C tests under valgrind: no memory errors and no definite leaks from the
# library. The slowest scenarios (10,000 events, 8 threads) are skipped here;
# they run at full speed in test-c.
VALGRIND_TESTS := test_client test_writes test_offline test_queue_storage test_cache test_events test_events_retry test_events_consent test_events_lifecycle test_config test_config_status test_events_pending test_handles test_events_features
# Two at a time, each lane with its own dev server (scripts/run-c-tests.sh).
VALGRIND := valgrind -q --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite --error-exitcode=99
test-valgrind: $(addprefix $(BUILD)/tests/,$(VALGRIND_TESTS))
	@APPNORTH_TEST_SKIP_SLOW=1 APPNORTH_TEST_WRAPPER='$(VALGRIND)' scripts/run-c-tests.sh $(addprefix $(BUILD)/tests/,$(VALGRIND_TESTS)) \
	    > $(BUILD)/valgrind.log 2>&1 || { cat $(BUILD)/valgrind.log; echo "valgrind: failures or definite leaks"; exit 1; }
	@echo "valgrind ($(words $(VALGRIND_TESTS)) programs): $$(tail -n 1 $(BUILD)/valgrind.log), no definite leaks"

# pytest-xdist, two workers, each with its own dev server (conftest.py),
# a test file's tests on one worker.
test-python: $(PYTEST) $(DIST_LIB)
	APPNORTH_LOCK_ORDER=1 APPNORTH_LIBRARY=$(abspath $(DIST_LIB)) PYTHONPATH=bindings/python:devserver \
	    $(PYTEST) -q -n 2 --dist loadfile bindings/python/tests devserver

# The dist library is self-contained: ldd names no toolchain path, and a C
# program and Python both load it with the toolchain hidden under an empty
# tmpfs (needs root for unshare; skipped with a note otherwise).
check-dist: $(DIST_LIB) $(BUILD)/examples/boards
	@! ldd $(DIST_LIB) | grep -q "$(TOOLCHAIN)" || { ldd $(DIST_LIB); echo "check-dist: ldd shows the toolchain"; exit 1; }
	@echo "check-dist: $$(stat -c %s $(DIST_LIB)) bytes stripped; ldd lists system libraries only"
	@Tests/hosts/packaging.sh $(DIST)
	@if [ "$$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then \
	    unshare -m sh -c 'mount -t tmpfs none "$(TOOLCHAIN)" && ! ls "$(TOOLCHAIN)/bin/swiftc" 2>/dev/null \
	      && $(BUILD)/examples/boards --version \
	      && APPNORTH_LIBRARY=$(abspath $(DIST_LIB)) PYTHONPATH=bindings/python python3 -c "import appnorth; print(\"python loads\", appnorth.version())"' \
	    && echo "check-dist: loads with $(TOOLCHAIN) hidden"; \
	  else echo "check-dist: skipped the hidden-toolchain load (needs root and unshare)"; fi

# Hosts other than the C tests: every C example compiles as strict C11; the
# README's C quickstart is cut out, built as C99 and C++17, and run; a broken
# toolchain first on PATH (rustup's cargo) is passed over or reported; the
# header's functions match abi/appnorth.symbols and the library's exports,
# each in its release's version node; a host needing a newer node
# (APPNORTH_0.9) is refused at start; the header's ABI keeps the last
# release's (abidiff against abi/appnorth-*.abi, scripts/abi-check.py, with
# its self-test); every function's man page lints clean (mandoc, groff);
# appnorth.api.json matches the header (pycparser) and the C layer's NULL
# handling, and the C# and Java examples' declarations match it; cffi and
# LuaJIT read the shipped cdef, bindgen the header, with int32 constants;
# LuaJIT's walkthrough survives 300 idle frames then a completion (its
# frame() is never compiled: jit.off); Ruby (ffi, default mode) exits 20
# times (200 in make test-soak) with live handles and never crashes (at_exit
# appnorth_shutdown);
# the C++, Go, Rust, C#, Java, LuaJIT, Ruby and Node walkthroughs run (skipped,
# with the command to run, without a working toolchain), and appnorth.hpp's own test runs under ASan and UBSan.
STRICT_CFLAGS := -std=c11 -pedantic -Wall -Wextra -Werror
SANITIZE     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

$(BUILD)/tests/cpp_layer_test: Tests/hosts/cpp_layer_test.cpp include/appnorth.hpp examples/c/devserver_admin.h $(DIST_LIB)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -g -Wall -Wextra -Werror -pedantic $(SANITIZE) $(DIST_CFLAGS) -o $@ $< $(DIST_LDFLAGS)

test-hosts: $(DIST_LIB) $(PYTEST) $(BUILD)/tests/cpp_layer_test
	@for f in examples/c/*.c; do $(CC) $(STRICT_CFLAGS) $(DIST_CFLAGS) -fsyntax-only $$f || exit 1; done
	@echo "hosts: every C example compiles with $(STRICT_CFLAGS)"
	@for std in c89 c99 c11; do echo '#include <appnorth.h>' | $(CC) -std=$$std -pedantic -Wall -Wextra -Werror \
	    $(DIST_CFLAGS) -x c -fsyntax-only - || exit 1; done
	@for std in c++11 c++17; do echo '#include <appnorth.h>' | $(CXX) -std=$$std -pedantic -Wall -Wextra -Werror \
	    $(DIST_CFLAGS) -x c++ -fsyntax-only - || exit 1; done
	@echo '#include <appnorth.hpp>' | $(CXX) -std=c++17 -pedantic -Wall -Wextra -Werror $(DIST_CFLAGS) -x c++ -fsyntax-only -
	@echo "hosts: appnorth.h compiles as -pedantic C89, C99, C11, C++11 and C++17; appnorth.hpp as C++17"
	@DEVSERVER_FLAGS=--seed-demo scripts/with-devserver.sh Tests/hosts/readme_quickstart.sh
	@Tests/hosts/toolchain_check.sh
	@python3 Tests/hosts/check_abi.py --library $(DIST_LIB)
	@Tests/hosts/version_node.sh $(DIST)
	@python3 scripts/abi-check.py --self-test $(DIST)
	@python3 scripts/abi-check.py $(DIST)
	@python3 scripts/man-pages.py --test
	@$(VENV)/bin/python Tests/hosts/check_api_json.py $(DIST)
	@python3 Tests/hosts/check_example_decls.py $(DIST)
	@$(VENV)/bin/python Tests/hosts/ffi_cffi.py $(DIST)
	@Tests/hosts/ffi_luajit.sh $(DIST)
	@DEVSERVER_FLAGS=--seed-demo scripts/with-devserver.sh Tests/hosts/luajit_idle_frames.sh $(DIST)
	@scripts/with-devserver.sh Tests/hosts/ruby_exit.sh $(DIST)
	@scripts/with-devserver.sh Tests/hosts/mono_exit.sh $(DIST)
	@Tests/hosts/ffi_bindgen.sh $(DIST)
	@scripts/with-devserver.sh sh -c 'ASAN_OPTIONS=detect_leaks=1 $(BUILD)/tests/cpp_layer_test "$$APPNORTH_TEST_SERVER"' \
	    > $(BUILD)/cpp-layer.log 2>&1 || { cat $(BUILD)/cpp-layer.log; exit 1; }
	@echo "appnorth.hpp under ASan+UBSan: $$(tail -n 1 $(BUILD)/cpp-layer.log)"
	@DEVSERVER_FLAGS=--seed-demo scripts/with-devserver.sh scripts/run-host-examples.sh $(BUILD) $(DIST) \
	    > $(BUILD)/host-examples.log 2>&1 || { cat $(BUILD)/host-examples.log; exit 1; }
	@tail -n 1 $(BUILD)/host-examples.log

# The Node.js binding: both tarballs installed offline into an empty folder,
# then node --test bindings/node/test/ against that install and the dev
# server, and the README's Node quickstart, with the machine's node and
# Debian 13's node in its root (test-soak: also the official Node 22, 24 and
# 26 builds, and Node 22 in the Debian 11 root) (scripts/test-node.sh; skipped, with the
# command to run, without a working node); then the short round of the
# addon's memory probe (scripts/test-node-leak.sh).
test-node: $(DIST_LIB)
	@DEVSERVER_FLAGS=--seed-demo scripts/with-devserver.sh scripts/test-node.sh $(BUILD) $(DIST)
	@scripts/with-devserver.sh scripts/test-node-leak.sh $(BUILD) $(DIST)

bench:
	@bench/run.sh

# Fuzzing: builds the core and each harness in fuzz/harnesses with
# swiftc -sanitize=fuzzer,address into build/fuzz, then runs each harness for
# FUZZ_SECONDS from the seed corpus in fuzz/corpus (one at a time, niced).
# FUZZ_TARGETS picks harnesses, e.g. make fuzz FUZZ_TARGETS="sse json_text".
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh $(FUZZ_TARGETS)

# Not part of `make test`: swift test and the C tests under AddressSanitizer
# (+UBSan for the C tests) and ThreadSanitizer, in .build/sanitize-*; logs
# in build/sanitize/. Results: docs/sanitizers.md.
sanitize: deps
	@scripts/sanitize.sh

clean:
	rm -rf .build $(DIST) $(BUILD)
