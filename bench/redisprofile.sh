#!/usr/bin/env bash
# Where the Redis home's admission spends its server time (issue 27), in two parts:
#  1. the script's Lua instructions, sampled under a stock Lua 5.1 (bench/redisprofile.lua:
#     Redis's Lua cannot sample itself), by function, and the calls per admission;
#  2. the C side on a real redis-server (bench/rediscosts.lua): each command the admission
#     sends, and the MessagePack of the provider's state as the bench leaves it.
# The library is the build's generated script (BUILD/core/redisquotascript.cpp), as in
# bench/redisreplay.sh. Needs lua5.1 (Debian package lua5.1; a bench tool, not a dependency of
# the build or the tests) and redis-server.
#
#   bench/redisprofile.sh BUILD_DIR [N]        (default 20000 admissions)
set -euo pipefail
BUILD=${1:?usage: bench/redisprofile.sh BUILD_DIR [N]}
N=${2:-20000}
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH="$BUILD/bench/tollgate-bench"
[ -x "$BENCH" ] || { echo "redisprofile: $BENCH not built (scripts/bench.sh builds it)" >&2; exit 2; }
command -v lua5.1 >/dev/null || { echo "redisprofile: lua5.1 is needed (apt-get install lua5.1)" >&2; exit 2; }
. "$HERE/scratchredis.sh"
scratchRedis redisprofile

libraryText "$BUILD" "$WORK/library.lua"
# Each row named by the library's source line it points at.
named() {
    while IFS=$'\t' read -r figure what line; do
        printf '| %s | %s: `%s` |\n' "$figure" "$what" "$(sed -n "${line}p" "$WORK/library.lua" | sed 's/^ *//' | cut -c1-70)"
    done
}
echo "### Lua instructions of one admission, by function (stock Lua 5.1, $N admissions)"
echo
echo "| share of the sampled instructions | where |"
echo "|---|---|"
lua5.1 "$HERE/redisprofile.lua" "$WORK/library.lua" "$N" func | named
echo
echo "### Function calls per admission"
echo
echo "| calls per admission | function |"
echo "|---|---|"
lua5.1 "$HERE/redisprofile.lua" "$WORK/library.lua" "$((N / 4))" calls | named
echo
# The state as the bench leaves it: the bench's own setup and a few admissions on the scratch server.
TOLLGATE_BENCH_REDIS_PORT=$PORT "$BENCH" --only redis --redis-calls 20 >/dev/null 2>&1
rc -x FUNCTION LOAD < "$HERE/rediscosts.lua" >/dev/null
echo "### The C side, each part alone on redis-server $(redis-server --version | grep -o 'v=[0-9.]*' | cut -c3-) ($N calls each)"
echo
echo "| part | µs per call |"
echo "|---|---:|"
rc FCALL tollgate_costs 3 '{bench}:limits' '{bench}:state' '{bench}:history' "$N" bench
