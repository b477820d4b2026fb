#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang and runs each for FUZZ_SECONDS seconds
# (default 20) on a copy of its seed corpus. Exits non-zero if a target finds a crash,
# printing where the crashing input is. Installs missing Debian packages (sudo when not root).
#
#   scripts/fuzz.sh                       # every target, 20 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh      # longer
#   FUZZ_TARGETS="fuzz_history" scripts/fuzz.sh
#   FUZZ_EXTRA_ARGS="-jobs=2 -workers=2" scripts/fuzz.sh   # more libFuzzer flags
#   FUZZ_BUILD_DIR=dir FUZZ_OUT_DIR=dir    # where to build / keep the run (default: a temp dir,
#                                         # removed when no target crashed)
#   FUZZ_BUILD_ONLY=1 scripts/fuzz.sh     # install and build only (scripts/test.sh, ahead)
# The targets run TOLLGATE_JOBS (default 2) at a time, each on a core of its own for its time.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}
JOBS=${TOLLGATE_JOBS:-2}
TARGETS=(${FUZZ_TARGETS:-fuzz_lockinfo fuzz_statefile fuzz_history})
read -r -a EXTRA_ARGS <<<"${FUZZ_EXTRA_ARGS:-}"

if ! [[ $SECONDS_PER_TARGET =~ ^[0-9]+$ ]] || ((SECONDS_PER_TARGET < 1)); then
    echo "fuzz: FUZZ_SECONDS must be a positive integer (got '$SECONDS_PER_TARGET')" >&2
    exit 2
fi

PACKAGES=(clang libclang-rt-14-dev cmake ninja-build nlohmann-json3-dev)
"$ROOT/scripts/ensure-packages.sh" "${PACKAGES[@]}"

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    CXX=clang++ cmake -S "$ROOT/fuzz" -B "$BUILD_DIR" -G Ninja
fi
cmake --build "$BUILD_DIR" -j"$JOBS"
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

if [ -n "${FUZZ_OUT_DIR:-}" ]; then
    OUT=$FUZZ_OUT_DIR
    mkdir -p "$OUT"
else
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-fuzz.XXXXXX")
fi

# Largest input per target: lock files past the 64 KiB read limit; a state image or a
# history chunk of a few KiB covers every structure.
max_len() {
    case $1 in
    fuzz_lockinfo) echo 70000 ;;
    *) echo 16384 ;;
    esac
}

# UBSan reports stop the run (-fno-sanitize-recover); print their stack too.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# One target's run (its own corpus copy, artifacts and log); its exit status goes to a file.
runTarget() {
    local target=$1 name=${1#fuzz_}
    local corpus=$OUT/corpus/$name artifacts=$OUT/artifacts/$name
    local dict=() status=0
    mkdir -p "$corpus" "$artifacts"
    cp -R "$ROOT/fuzz/corpus/$name/." "$corpus/" # fuzz a copy: the repository's corpus stays as committed
    [ -f "$ROOT/fuzz/dict/$name.dict" ] && dict=(-dict="$ROOT/fuzz/dict/$name.dict")
    "$BUILD_DIR/$target" "$corpus" \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$target")" \
        -artifact_prefix="$artifacts/" -print_final_stats=1 "${dict[@]}" "${EXTRA_ARGS[@]}" \
        >"$OUT/$target.log" 2>&1 || status=$?
    echo "$status" >"$OUT/$target.status"
}

for target in "${TARGETS[@]}"; do
    seeds=$ROOT/fuzz/corpus/${target#fuzz_}
    [ -d "$seeds" ] || { echo "fuzz: no seed corpus $seeds" >&2; exit 2; }
done
for target in "${TARGETS[@]}"; do
    while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
    echo "fuzz: $target for ${SECONDS_PER_TARGET}s (corpus $OUT/corpus/${target#fuzz_})"
    runTarget "$target" &
done
wait

failed=()
for target in "${TARGETS[@]}"; do
    artifacts=$OUT/artifacts/${target#fuzz_}
    status=$(cat "$OUT/$target.status" 2>/dev/null || echo "no status")
    echo "fuzz: $target"
    grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)' \
        "$OUT/$target.log" | sed "s/^/  /" || true
    found=$(find "$artifacts" -type f | sort)
    if [ "$status" != 0 ] || [ -n "$found" ]; then
        echo "fuzz: $target FAILED (exit $status); log: $OUT/$target.log" >&2
        grep -E 'ERROR: |runtime error|invariant violated|SUMMARY' "$OUT/$target.log" | head -5 | sed "s/^/  /" >&2 || true
        for f in $found; do
            echo "  crash input: $f" >&2
            echo "  reproduce:   $BUILD_DIR/$target $f" >&2
        done
        failed+=("$target")
    fi
done

if ((${#failed[@]})); then
    echo "fuzz: crashes in ${failed[*]}; inputs and logs are in $OUT." >&2
    echo "fuzz: add each crash input to tests/data/fuzz-regressions/<target>/ (see fuzz/README.md)." >&2
    exit 1
fi
if [ -n "${FUZZ_OUT_DIR:-}" ]; then
    echo "fuzz: no crash in ${TARGETS[*]} (${SECONDS_PER_TARGET}s each); run kept in $OUT"
else
    # Nothing to inspect: a run of each CI left ~6 MB in /tmp.
    rm -rf -- "$OUT"
    echo "fuzz: no crash in ${TARGETS[*]} (${SECONDS_PER_TARGET}s each)"
fi
