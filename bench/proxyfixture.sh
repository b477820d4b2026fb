# Sourced by the proxy bench scripts (bench/proxycpu.sh, proxylatency.sh, proxymemory.sh): a
# temporary directory ($WORK), the local servers they start (the mock provider, a sink, the
# relay floor) and `tollgate proxy` itself; every one of them is stopped and $WORK removed when
# the script exits, however it exits.
#   proxyFixture NAME      (NAME: the calling script's, for its messages)
proxyFixture() {
    FIXTURE_NAME=$1
    WORK=$(mktemp -d)
    SERVER_PIDS=()
    PROXY_PID=
    trap proxyFixtureCleanup EXIT
}
proxyFixtureCleanup() {
    local p
    for p in "$PROXY_PID" "${SERVER_PIDS[@]}"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$WORK"
}

# startServer OUT COMMAND...: COMMAND in the background, output to $WORK/OUT, awaited until it
# prints its first line (the port it listens on, or "listening on ADDR").
startServer() {
    local out=$WORK/$1
    shift
    "$@" >"$out" &
    SERVER_PIDS+=($!)
    for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.05; done
    [ -s "$out" ] || { echo "$FIXTURE_NAME: $* printed nothing in 5 s" >&2; exit 1; }
}

# startProxy TOLLGATE ARGS...: `TOLLGATE proxy ARGS... --listen 127.0.0.1:0`, awaited until it
# listens; sets PROXY_PID and PROXY (its URL). A caller in a subshell ($(...)) stops it itself:
# the subshell's PROXY_PID is not the cleanup's.
startProxy() {
    local t=$1
    shift
    "$t" proxy "$@" --listen 127.0.0.1:0 >"$WORK/proxy.out" 2>&1 &
    PROXY_PID=$!
    for _ in $(seq 100); do grep -q listening "$WORK/proxy.out" 2>/dev/null && break; sleep 0.05; done
    PROXY=$(sed -n 's/^listening on \(http:[^ ]*\) .*/\1/p' "$WORK/proxy.out")
    [ -n "$PROXY" ] || { echo "$FIXTURE_NAME: the proxy did not start: $(cat "$WORK/proxy.out")" >&2; exit 1; }
}
stopProxy() {
    kill "$PROXY_PID"
    wait "$PROXY_PID" 2>/dev/null || true
    PROXY_PID=
}
