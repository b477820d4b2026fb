#!/usr/bin/env bash
# Builds (installing what is missing) and runs every test:
#   1. the normal build: the suites no sanitizer tree can run (the multi-host suite, the
#      official SDKs, the Python and Node clients, the C library's with their workers), the two
#      random walks whole, the short kill storm, and an install into a temporary prefix
#      (scripts/installcheck.sh);
#   2. every other suite, the dashboard's (offscreen) included, built with AddressSanitizer +
#      UndefinedBehaviorSanitizer (the build runs beside phase 1's tests, at the lowest priority);
#   3. the dashboard's (threaded) tests and the proxy's built with ThreadSanitizer, in one tree
#      (built beside phase 2's tests, as is phase 4's fuzzer build, at the lowest priority);
#   4. each libFuzzer target for a short while (scripts/fuzz.sh).
# TOLLGATE_QUICK=1 runs phase 1 only, with every suite in the normal build (a fast local loop);
# CI runs everything.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export QT_QPA_PLATFORM=offscreen
export TOLLGATE_JOBS=${TOLLGATE_JOBS:-2}

# Each banner shows the seconds since test.sh began, so a slow phase is easy to find, and the
# CPU time the whole machine spent since (busy: not idle, not waiting for I/O; /proc/stat), so
# its idle cores are too: a phase whose busy time grew by less than twice its length (2 cores)
# left CPU unused. The run is bound by CPU where the two grow alike.
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpuBusy() { awk -v hz="$HZ" '/^cpu /{printf "%d", ($2 + $3 + $4 + $7 + $8) / hz; exit}' /proc/stat 2>/dev/null; }
BUSY_AT_START=$(cpuBusy)
phase() {
    local busy
    busy=$(($(cpuBusy) - ${BUSY_AT_START:-0}))
    echo
    echo "==== test.sh: $* (at ${SECONDS} s; CPU busy ${busy} s) ===="
}

# background LOG COMMAND...: COMMAND at the lowest priority, output to LOG, in a session of its
# own so that an early exit stops the whole of it (finish). The kernel's scheduler
# autogroups (/proc/sys/kernel/sched_autogroup_enabled, on by default) put each new session in a
# group that shares the CPU equally with the others whatever its processes' nice values: a
# build at nice 19 took half the CPU from the tests beside it. So the group is set to nice 19
# as well (its /proc/self/autogroup; absent where the kernel has no autogroups). Sets BG_PID.
BG_PID=
background() {
    local log=$1
    shift
    setsid -w bash -c '{ echo 19 >/proc/self/autogroup; } 2>/dev/null || true; exec nice -n 19 "$@"' \
        background "$@" >"$log" 2>&1 &
    BG_PID=$!
}
# Every temporary file of the run (the tests' directories, the CLI's retry-after files, the
# servers' files and the builds' logs below) goes in one directory of the run's own: removed
# when the run passes, kept and named when it fails. A test killed by its timeout, or runs
# killed whole (runner and keeper at once) in a pid namespace that is gone, left theirs in
# /tmp for good.
# Shared as /tmp is (sticky, everyone may create files): the suites that run a second user's
# processes have them make their own temporary files here.
RUN_TMP=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-test.XXXXXX")
chmod 1777 "$RUN_TMP"
export TMPDIR=$RUN_TMP
REDIS_PID=
# On every exit path: the background build (when a phase ends the run early) and the
# redis-server are stopped, then the run's temporary files go, or are kept on a failure.
finish() {
    local status=$1
    if [ -n "$BG_PID" ]; then
        kill -- "-$BG_PID" 2>/dev/null || true
        wait "$BG_PID" 2>/dev/null || true
    fi
    [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
    if [ "$status" = 0 ]; then
        rm -rf "$RUN_TMP"
    else
        echo "test.sh: failed (exit $status); the run's temporary files are kept in $RUN_TMP" >&2
    fi
}
trap 'finish $?' EXIT
# awaitBackground WHAT LOG: waits for BG_PID, shows its output, fails naming WHAT if it failed.
awaitBackground() {
    local status=0
    wait "$BG_PID" || status=$?
    BG_PID=
    cat "$2"
    [ "$status" = 0 ] || { echo "test.sh: $1 failed (exit $status)" >&2; exit 1; }
}

phase "1/4 normal build"
# The dashboard's tests are built and run in phases 2 and 3, under ASan+UBSan and under TSan,
# which check all that a plain run does and more; a third, unsanitized run of them cost about
# 250 CPU-seconds (docs/RELIABILITY.md §5). TOLLGATE_QUICK=1 (phase 1 alone) keeps them here.
# Nor the other suites the ASan+UBSan tree runs: this tree builds and runs only what no sanitizer
# tree can (the multi-host suite, the official SDKs, the Python and Node clients, the C
# library's suite with their workers, the two random walks a sanitizer tree shortens) and the
# kill storm, against this build's binaries. The others' build and run here cost a fifth of
# the run's CPU time, and the run is bound by CPU (docs/RELIABILITY.md §5).
if [ "${TOLLGATE_QUICK:-0}" = 1 ]; then allTests=ON; else allTests=OFF; fi
TOLLGATE_CMAKE_ARGS="-DTOLLGATE_BUILD_DASHBOARD_TESTS=$allTests -DTOLLGATE_BUILD_CORE_TESTS=$allTests" \
    "$ROOT/scripts/bootstrap.sh"

# One redis-server for the Redis-home suites of every phase (tests that restart, stop or
# password-protect a server start their own): a free loopback port, files in a temporary
# directory, nothing persisted; stopped on every exit path.
REDIS_DIR=$(mktemp -d)
for attempt in $(seq 1 20); do
    port=$((20000 + RANDOM % 30000))
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$REDIS_DIR" \
        --logfile "$REDIS_DIR/redis.log" --maxmemory-policy noeviction >/dev/null 2>&1 &
    REDIS_PID=$!
    # Ours answers (its process_id is our child), not another server that had the port.
    for i in $(seq 1 100); do
        kill -0 "$REDIS_PID" 2>/dev/null || break
        if redis-cli -h 127.0.0.1 -p "$port" INFO server 2>/dev/null | grep -q "^process_id:$REDIS_PID"; then
            export TOLLGATE_TEST_REDIS_URL="redis://127.0.0.1:$port"
            break 2
        fi
        sleep 0.05
    done
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=
done
[ -n "${TOLLGATE_TEST_REDIS_URL:-}" ] || { echo "test.sh: could not start redis-server" >&2; exit 1; }
echo "test.sh: redis-server $REDIS_PID on $TOLLGATE_TEST_REDIS_URL"

# The official provider SDKs that tst_sdkclients points at the proxy: exactly the versions of
# tests/sdk/package-lock.json (npm ci: from the lockfile only; its node_modules is not committed).
if ! command -v npm >/dev/null; then
    "$ROOT/scripts/ensure-packages.sh" npm
fi
phase "1/4 tests"
(cd "$ROOT/tests/sdk" && npm ci --no-audit --no-fund --loglevel=error)

# Phase 2's build starts now, beside phase 1's tests, at the lowest priority: those tests spend
# much of their time waiting (leases running out, servers restarting, timeouts), and the
# compiler takes the CPU they leave while every test process still comes first. Its output is
# shown at phase 2. The packages it checks are all installed by now (phase 1's bootstrap, npm).
ASAN_BUILD_LOG="$REDIS_DIR/asan-build.log"
if [ "${TOLLGATE_QUICK:-0}" != 1 ]; then
    TOLLGATE_BUILD_DIR="$ROOT/build-asan" \
    TOLLGATE_CMAKE_ARGS="-DTOLLGATE_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug" \
        background "$ASAN_BUILD_LOG" "$ROOT/scripts/bootstrap.sh"
fi

ctest --test-dir "${TOLLGATE_BUILD_DIR:-$ROOT/build}" --output-on-failure -j2 "$@"
phase "1/4 install check"
# The install: every file in place, desktop-file-validate, appstreamcli, man -l, completion.
"$ROOT/scripts/installcheck.sh" "${TOLLGATE_BUILD_DIR:-$ROOT/build}"
[ "${TOLLGATE_QUICK:-0}" = 1 ] && exit 0

# The multi-host suite (namespaces, one lease of waiting) and the SDK suite (Node processes,
# not our memory) run once, in the normal phase: sanitizer trees do not build them.
phase "2/4 AddressSanitizer + UndefinedBehaviorSanitizer"
awaitBackground "the ASan build" "$ASAN_BUILD_LOG"

# Phases 3 and 4 build now, beside phase 2's tests, as phase 2 built beside phase 1's: one
# waits on a stopped Redis or a lease while another runs on one core.
# One ThreadSanitizer tree: the dashboard and its tests, and the CLI with the proxy's tests.
# The dashboard's tests spawn phase 1's CLI (TOLLGATE_TEST_CLI: its threads are not what they
# check); the proxy's event loop hands work to store threads and threads of their own (queued
# admissions, long bodies), so tst_proxy runs this tree's CLI, built with TSan (OWN_CLI in
# tests/CMakeLists.txt), and tst_limiterpool's threads share the pool of store connections.
# The tests of label tsan are those (tests/CMakeLists.txt).
buildLater() {
    if [ ! -f "$ROOT/build-tsan/CMakeCache.txt" ]; then
        cmake -S "$ROOT" -B "$ROOT/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTOLLGATE_SANITIZE=thread \
            -DTOLLGATE_TEST_CLI="${TOLLGATE_BUILD_DIR:-$ROOT/build}/app/tollgate" >/dev/null
    fi
    # Their programs, named as the tests are; a sharded test is several tests of one program,
    # NAME_KofN (SHARDS in tests/CMakeLists.txt). Not from ctest's "Test command": in a tree
    # not built yet it has none.
    mapfile -t tsanPrograms < <(ctest --test-dir "$ROOT/build-tsan" -L '^tsan$' -N \
        | sed -n '/^ *Test *#[0-9]*: /{s///;s/_[0-9]*of[0-9]*$//;p}' | sort -u)
    cmake --build "$ROOT/build-tsan" -j"$TOLLGATE_JOBS" --target "${tsanPrograms[@]}" tollgate
    FUZZ_BUILD_ONLY=1 "$ROOT/scripts/fuzz.sh"
}
LATER_BUILD_LOG="$REDIS_DIR/later-build.log"
export ROOT
export -f buildLater
background "$LATER_BUILD_LOG" bash -c 'set -euo pipefail; buildLater'
phase "2/4 tests"
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:suppressions=$ROOT/tests/sanitizers/asan.supp" \
LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0" \
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$ROOT/tests/sanitizers/ubsan.supp" \
    ctest --test-dir "$ROOT/build-asan" --output-on-failure -j2 "$@"

phase "3/4 ThreadSanitizer (the dashboard's tests and the proxy's)"
awaitBackground "the ThreadSanitizer or fuzzer build" "$LATER_BUILD_LOG"
# ignore_noninstrumented_modules=1: accesses by interceptors that uninstrumented libraries (Qt,
# glib, libdbus) call are not checked, as their locking is invisible to TSan; tsan.supp names
# libdbus only. tst_tsansuppressions (label tsan) fails if either ever hides a race in our code,
# in a slot under Qt's frames too.
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:ignore_noninstrumented_modules=1:suppressions=$ROOT/tests/sanitizers/tsan.supp" \
    ctest --test-dir "$ROOT/build-tsan" -L '^tsan$' --output-on-failure -j2

phase "4/4 fuzzing (${FUZZ_SECONDS:=10} s per target)"
# After phase 3's tests, not beside them: run beside them at the lowest priority (tried on
# 2026-11-28), the fuzzers ran 3 to 13 times fewer inputs in their time, to save ~23 s.
FUZZ_SECONDS=$FUZZ_SECONDS "$ROOT/scripts/fuzz.sh"
phase "done"
