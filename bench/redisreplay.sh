#!/usr/bin/env bash
# The Redis home's admission replayed inside one call, next to row 6f's lower-bound admission
# in the same harness (issue 27): what the script itself costs, without the round trip, the
# FCALL's own overhead or the client. The library is the build's generated script
# (BUILD/core/redisquotascript.cpp) loaded under another name with a function that replays the
# bench's admission (the arguments RedisQuotaBackend::admit sends for `tollgate-bench`'s
# request) N times; row 6f's script is taken from bench/redisbench.cpp. Each round runs on a
# fresh home whose limits the build's own tollgate-bench sets (they never run out).
#
#   bench/redisreplay.sh BUILD_DIR [N [ROUNDS]]     (default 2000 admissions, 5 rounds)
#   LIBRARY=variant.lua bench/redisreplay.sh ...    (a variant of the library text instead)
set -euo pipefail
BUILD=${1:?usage: bench/redisreplay.sh BUILD_DIR [N [ROUNDS]]}
N=${2:-2000}
R=${3:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH="$BUILD/bench/tollgate-bench"
[ -x "$BENCH" ] || { echo "redisreplay: $BENCH not built (scripts/bench.sh builds it)" >&2; exit 2; }
. "$HERE/scratchredis.sh"
scratchRedis redisreplay

# The library's text: the generated source's raw string, or a variant given by the caller.
if [ -n "${LIBRARY:-}" ]; then
    cp "$LIBRARY" "$WORK/library.lua"
else
    libraryText "$BUILD" "$WORK/library.lua"
fi
# Its registration block (from `if redis.register_function then` on) replaced by the replay.
{
    echo "#!lua name=tollgate_replay"
    echo "local FUNCTION_NAME = 'tollgate_replay_main'"
    sed '/^if redis.register_function then$/,$d' "$WORK/library.lua"
    cat <<'LUA'
redis.register_function('tollgate_replay', function(keys, args)
  local n = tonumber(args[1])
  local a = cmsgpack.pack({ caller = 'bench', host = 'replay-host', pid = 4242, provider = 'bench',
    rid = 1, st = 1, wpid = 4242, wst = 1 })
  local argv = { 'admit', '', '{bench}:', '100000', a, '' }
  local admitted = 0
  local t0 = redis.call('TIME')
  for _ = 1, n do
    if cmsgpack.unpack(main(keys, argv)).admitted then admitted = admitted + 1 end
  end
  local t1 = redis.call('TIME')
  return string.format('%.1f %d', ((t1[1] - t0[1]) * 1e6 + (t1[2] - t0[2])) / n, admitted)
end)
LUA
} > "$WORK/replay.lua"
# Row 6f's script, as the bench runs it, in a function of its own.
{
    echo "#!lua name=tollgate_lowerbound"
    echo "local function lowerBound(KEYS, ARGV)"
    awk '/LOWER_BOUND_ADMISSION = R"lua\(/ { on = 1; next } on && /^\)lua";/ { exit } on' "$HERE/redisbench.cpp"
    cat <<'LUA'
end
redis.register_function('tollgate_lowerbound', function(keys, args)
  local n = tonumber(args[1])
  local argv = { '100', 'bench' }
  local admitted = 0
  local t0 = redis.call('TIME')
  for _ = 1, n do
    if lowerBound(keys, argv)[1] == 1 then admitted = admitted + 1 end
  end
  local t1 = redis.call('TIME')
  return string.format('%.1f %d', ((t1[1] - t0[1]) * 1e6 + (t1[2] - t0[2])) / n, admitted)
end)
LUA
} > "$WORK/lowerbound.lua"

echo "| round | row 6f's script, µs per admission | the home's script, µs per admission | ratio |"
echo "|---:|---:|---:|---:|"
for r in $(seq "$R"); do
    rc FLUSHALL >/dev/null
    rc FUNCTION FLUSH >/dev/null
    TOLLGATE_BENCH_REDIS_PORT=$PORT "$BENCH" --only redis --redis-calls 20 >/dev/null 2>&1
    rc -x FUNCTION LOAD < "$WORK/replay.lua" >/dev/null
    rc -x FUNCTION LOAD < "$WORK/lowerbound.lua" >/dev/null
    read -r lb lbOk < <(rc FCALL tollgate_lowerbound 4 '{lb}:global' '{lb}:p:bench' '{lb}:fence' '{lb}:history' "$N")
    read -r home homeOk < <(rc FCALL tollgate_replay 5 '{bench}:limits' '{bench}:state' '{bench}:history' \
        '{bench}:home' '{bench}:corrupt' "$N")
    if [ "$lbOk" != "$N" ] || [ "$homeOk" != "$N" ]; then
        echo "redisreplay: not every replayed call was an admission ($lbOk and $homeOk of $N)" >&2
        exit 1
    fi
    awk -v r="$r" -v a="$lb" -v b="$home" 'BEGIN { printf "| %d | %.1f | %.1f | %.2f× |\n", r, a, b, b / a }'
done
