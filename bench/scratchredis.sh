# Sourced by the Redis bench scripts (bench/redisab.sh, bench/redisreplay.sh): a scratch
# redis-server on a free loopback port, no persistence, in a temporary directory ($WORK), shut
# down and removed when the script exits. Sets PORT; rc runs redis-cli against it; libraryText
# writes out the build's library text.
#   scratchRedis NAME      (NAME: the calling script's, for its messages)
scratchRedis() {
    local name=$1
    command -v redis-server >/dev/null && command -v redis-cli >/dev/null || {
        echo "$name: redis-server and redis-cli are needed (Debian package redis-server)" >&2
        exit 2
    }
    WORK=$(mktemp -d)
    PORT=
    trap 'if [ -n "$PORT" ]; then redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; fi; rm -rf "$WORK"' EXIT
    local p
    for p in $(shuf -i 20000-40000 -n 20); do
        if redis-server --bind 127.0.0.1 --port "$p" --save '' --appendonly no --daemonize yes \
            --dir "$WORK" --logfile "$WORK/redis.log" >/dev/null 2>&1; then
            for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
            if redis-cli -p "$p" ping >/dev/null 2>&1; then PORT=$p; break; fi
        fi
    done
    [ -n "$PORT" ] || { echo "$name: no redis-server came up" >&2; exit 1; }
}
rc() { redis-cli -p "$PORT" "$@"; }

# The library's text as the build embeds it (BUILD/core/redisquotascript.cpp: the generated
# source's raw string, constants in place), written to OUT.
#   libraryText BUILD OUT
libraryText() {
    python3 - "$1/core/redisquotascript.cpp" "$2" <<'PY'
import sys
src = open(sys.argv[1]).read()
start = src.index('R"TOLLGATE_LUA(') + len('R"TOLLGATE_LUA(')
open(sys.argv[2], 'w').write(src[start:src.rindex(')TOLLGATE_LUA"')])
PY
}
