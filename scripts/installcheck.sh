#!/usr/bin/env bash
# installcheck.sh [BUILD_DIR]: installs an already configured and built tree (default ./build)
# into a fresh temporary prefix with `cmake --install`, and checks what a user gets:
#   - every expected file is there, the programs executable and runnable from the prefix;
#   - desktop-file-validate passes on the .desktop file, whose Exec and Icon name installed files;
#   - the man page renders with `man -l`, and neither `man --warnings` nor `groff -ww` warns;
#   - the man page documents every command, subcommand (and alias), long option and exit code
#     that `tollgate ... --help` lists, found by walking the help tree, so a new command or
#     option without a man entry fails here; the checker is first shown a doctored page to
#     prove it notices what is missing;
#   - the bash completion parses (bash -n), offers every command, alias and long option of the
#     help tree, completes `tollgate st<TAB>` to `status`, offers the
#     providers of the --home on the line, and creates no home while doing so;
#   - `appstreamcli validate --no-net` passes on the metainfo;
#   - the C library: libtollgate.so with its SONAME, only tollgate_* exported, tollgate.h and
#     tollgate.pc; the README's C example (clients/c/example.c) compiles against the installed
#     header with `pkg-config --cflags --libs tollgate` and runs against the installed library;
#   - the Python client (clients/python) installs with pip (offline: --no-build-isolation
#     --no-index, from a copy of the folder) and is admitted through the installed library;
#   - the Node addon (when built): <libdir>/tollgate/node/tollgate.node, and the Node client
#     (clients/node) npm-installed from a copy (offline: it has no dependencies) is admitted
#     through it and the installed library.
# Configures and builds nothing itself; installs the Debian packages of the tools it needs when
# they are missing (desktop-file-utils, man-db, groff-base, appstream; via ensure-packages.sh).
# Exit 0 when all hold; else lists every failure, exit 1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
APP_ID=io.github.tollgate.Dashboard

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    echo "installcheck: $BUILD is not a configured build directory (run scripts/bootstrap.sh)" >&2
    exit 2
fi
# The tools, by Debian package (scripts/bootstrap.sh lists the same ones).
TOOL_PACKAGES=(desktop-file-utils man-db groff-base appstream)
if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
    "$ROOT/scripts/ensure-packages.sh" "${TOOL_PACKAGES[@]}"
fi
for tool in desktop-file-validate man groff appstreamcli; do
    if ! command -v "$tool" >/dev/null; then
        echo "installcheck: $tool is missing (Debian packages: ${TOOL_PACKAGES[*]})" >&2
        exit 2
    fi
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PREFIX=$WORK/prefix

failures=()
checks=0
fail() { failures+=("$*"); }
check() { checks=$((checks + 1)); }

if ! cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1; then
    cat "$WORK/install.log" >&2
    echo "installcheck: cmake --install failed" >&2
    exit 1
fi

# The GNUInstallDirs layout this build was configured with.
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
BINDIR=$(cache CMAKE_INSTALL_BINDIR)
MANDIR=$(cache CMAKE_INSTALL_MANDIR)
LIBDIR=$(cache CMAKE_INSTALL_LIBDIR)
INCLUDEDIR=$(cache CMAKE_INSTALL_INCLUDEDIR)
DATADIR=$(cache CMAKE_INSTALL_DATAROOTDIR)
GUI=$(cache TOLLGATE_BUILD_GUI)
: "${BINDIR:=bin}" "${MANDIR:=share/man}" "${DATADIR:=share}" "${LIBDIR:=lib}" "${INCLUDEDIR:=include}"

expected=()
expect_file() {
    expected+=("$1")
    check
    [ -f "$PREFIX/$1" ] && [ -s "$PREFIX/$1" ] || fail "missing or empty: $1"
}
expect_exec() {
    expected+=("$1")
    check
    [ -f "$PREFIX/$1" ] && [ -x "$PREFIX/$1" ] || fail "missing or not executable: $1"
}

expect_exec "$BINDIR/tollgate"
expect_file "$MANDIR/man1/tollgate.1"
expect_file "$DATADIR/bash-completion/completions/tollgate"
VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
expect_file "$LIBDIR/libtollgate.so.$VERSION"
expect_file "$LIBDIR/libtollgate.so.${VERSION%%.*}"
expect_file "$LIBDIR/libtollgate.so"
expect_file "$LIBDIR/pkgconfig/tollgate.pc"
expect_file "$INCLUDEDIR/tollgate.h"
NODE_ADDON=
if [ -f "$BUILD/clients/node/tollgate.node" ]; then
    NODE_ADDON=$LIBDIR/tollgate/node/tollgate.node
    expect_file "$NODE_ADDON"
fi
DESKTOP=$DATADIR/applications/$APP_ID.desktop
METAINFO=$DATADIR/metainfo/$APP_ID.metainfo.xml
if [[ $GUI == ON || $GUI == TRUE || $GUI == 1 ]]; then
    expect_exec "$BINDIR/tollgate-dashboard"
    expect_file "$DESKTOP"
    expect_file "$METAINFO"
    expect_file "$DATADIR/icons/hicolor/scalable/apps/$APP_ID.svg"
    expect_file "$DATADIR/icons/hicolor/256x256/apps/$APP_ID.png"
fi

# Nothing else is installed (a new install rule belongs in the list above), and cmake's own
# manifest names exactly these files.
check
extra=$(cd "$PREFIX" && find . -mindepth 1 ! -type d | sed 's|^\./||' | sort \
    | comm -23 - <(printf '%s\n' "${expected[@]}" | sort))
[ -z "$extra" ] || fail "installed but not checked here: $(tr '\n' ' ' <<<"$extra")"
check
if [ -f "$BUILD/install_manifest.txt" ]; then
    manifest=$(sed "s|^$PREFIX/||" "$BUILD/install_manifest.txt" | sort)
    [ "$manifest" = "$(printf '%s\n' "${expected[@]}" | sort)" ] \
        || fail "install_manifest.txt differs from the expected files: $(tr '\n' ' ' <<<"$manifest")"
else
    fail "cmake --install wrote no install_manifest.txt"
fi

# The installed CLI runs from the prefix (no path into the build tree).
check
"$PREFIX/$BINDIR/tollgate" --version >/dev/null 2>&1 || fail "$BINDIR/tollgate --version does not run"

# Desktop file and icon.
if [ -f "$PREFIX/$DESKTOP" ]; then
    check
    if ! out=$(desktop-file-validate "$PREFIX/$DESKTOP" 2>&1); then
        fail "desktop-file-validate: $out"
    fi
    check
    exec_name=$(sed -n 's/^Exec=\([^ ]*\).*/\1/p' "$PREFIX/$DESKTOP")
    [ -x "$PREFIX/$BINDIR/$exec_name" ] || fail "the desktop file's Exec ($exec_name) is not in $BINDIR"
    check
    icon=$(sed -n 's/^Icon=//p' "$PREFIX/$DESKTOP")
    [ "$icon" = "$APP_ID" ] || fail "the desktop file's Icon ($icon) is not $APP_ID"
    png=$PREFIX/$DATADIR/icons/hicolor/256x256/apps/$APP_ID.png
    if [ -f "$png" ]; then
        check
        # PNG: the signature, then IHDR with width and height as 32-bit big-endian numbers.
        dims=$(od -An -tu1 -j16 -N8 "$png" | tr -s ' ')
        [ "$dims" = " 0 0 1 0 0 0 1 0" ] || fail "the hicolor PNG is not 256x256 (IHDR bytes:$dims)"
    fi
fi
# The installed dashboard starts from the prefix, opens on a state directory that does not
# exist, and renders its window (scripts/test.sh runs the dashboard's tests in its sanitizer
# trees only: this is the optimised binary's run).
if [ -x "$PREFIX/$BINDIR/tollgate-dashboard" ]; then
    check
    shot=$WORK/dashboard.png
    if ! out=$(QT_QPA_PLATFORM=offscreen timeout 60 "$PREFIX/$BINDIR/tollgate-dashboard" \
        --home "$WORK/no-such-home" --settings "$WORK/dashboard.ini" --size 800x600 --screenshot "$shot" 2>&1); then
        fail "the installed tollgate-dashboard --screenshot failed: $(tail -c 300 <<<"$out")"
    elif [ "$(od -An -tx1 -N8 "$shot" 2>/dev/null | tr -d ' ')" != 89504e470d0a1a0a ]; then
        fail "the installed tollgate-dashboard --screenshot wrote no PNG"
    fi
fi
if [ -f "$PREFIX/$METAINFO" ]; then
    check
    if ! out=$(appstreamcli validate --no-net "$PREFIX/$METAINFO" 2>&1); then
        fail "appstreamcli validate: $out"
    fi
fi

# The C library: its SONAME, its exports, and the README's example built against what is installed.
LIB=$PREFIX/$LIBDIR/libtollgate.so
if [ -f "$LIB" ]; then
    check
    soname=$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ "$soname" = "libtollgate.so.${VERSION%%.*}" ] || fail "libtollgate.so's SONAME is '$soname'"
    check
    exported=$(nm -D --defined-only "$LIB" | awk '$2 == "T" { print $3 }' | grep -v '^tollgate_' || true)
    [ -z "$exported" ] || fail "libtollgate.so exports functions other than tollgate_*: $(head -c 300 <<<"$exported")"
    check
    if flags=$(pkg-config --define-variable=prefix="$PREFIX" --cflags --libs \
        "$PREFIX/$LIBDIR/pkgconfig/tollgate.pc" 2>"$WORK/pc.log"); then
        # shellcheck disable=SC2086 # the flags are words
        if cc -std=c11 -Wall -Wextra -pedantic -Werror -o "$WORK/example" "$ROOT/clients/c/example.c" $flags \
            -Wl,-rpath,"$PREFIX/$LIBDIR" 2>"$WORK/cc.log"; then
            check
            "$PREFIX/$BINDIR/tollgate" limits set anthropic --requests 5 --window 60 --home "$WORK/capi-home" -q \
                && "$WORK/example" "$WORK/capi-home" >"$WORK/example.log" 2>&1 \
                || fail "the C example does not run against the installed library: $(cat "$WORK/example.log")"
        else
            fail "the README's C example does not compile against the installed header: $(cat "$WORK/cc.log")"
        fi
    else
        fail "pkg-config cannot read the installed tollgate.pc: $(cat "$WORK/pc.log")"
    fi
fi

# The Python client: pip installs it (from a copy: pip builds in the folder it is given) and it
# runs against the installed library. Skipped without Debian's python3 and pip.
if [ -f "$LIB" ] && [ -x /usr/bin/python3 ] && /usr/bin/python3 -m pip --version >/dev/null 2>&1; then
    check
    cp -r "$ROOT/clients/python" "$WORK/pysrc"
    rm -rf "$WORK/pysrc/build" "$WORK/pysrc"/*.egg-info
    if /usr/bin/python3 -m pip install -q --disable-pip-version-check --no-build-isolation --no-index \
        --target "$WORK/py" "$WORK/pysrc" >"$WORK/pip.log" 2>&1; then
        check
        TOLLGATE_LIBRARY="$PREFIX/$LIBDIR/libtollgate.so.${VERSION%%.*}" PYTHONPATH="$WORK/py" \
            /usr/bin/python3 -c 'import sys, tollgate
with tollgate.call("anthropic", caller="installcheck", input_tokens=1, max_tokens=1, home=sys.argv[1]) as c:
    c.settle({"input_tokens": 1, "output_tokens": 1})' "$WORK/capi-home" >"$WORK/py.log" 2>&1 \
            || fail "the pip-installed Python client does not run: $(cat "$WORK/py.log")"
    else
        fail "pip cannot install clients/python: $(cat "$WORK/pip.log")"
    fi
fi

# The Node client: npm installs a copy of it (one away from the repository's build tree) and it
# runs through the installed addon, which finds the installed library by its RUNPATH.
if [ -n "$NODE_ADDON" ] && [ -f "$PREFIX/$NODE_ADDON" ] && command -v npm >/dev/null; then
    check
    cp -r "$ROOT/clients/node" "$WORK/nodesrc"
    mkdir -p "$WORK/nodeapp"
    if (cd "$WORK/nodeapp" && npm install --offline --no-audit --no-fund --loglevel=error --install-links \
        "$WORK/nodesrc") >"$WORK/npm.log" 2>&1; then
        check
        (cd "$WORK/nodeapp" && TOLLGATE_NODE_ADDON="$PREFIX/$NODE_ADDON" node -e '
const tollgate = require("tollgate");
tollgate.call("anthropic", { caller: "installcheck", inputTokens: 1, maxTokens: 1, home: process.argv[1] })
    .then((c) => { c.settle({ input_tokens: 1, output_tokens: 1 }); c.free(); })
    .catch((e) => { console.error(e); process.exit(1); });' "$WORK/capi-home") >"$WORK/node.log" 2>&1 \
            || fail "the npm-installed Node client does not run: $(cat "$WORK/node.log")"
    else
        fail "npm cannot install clients/node: $(cat "$WORK/npm.log")"
    fi
fi

# Man page: renders, without a single warning, and documents everything --help lists.
MAN=$PREFIX/$MANDIR/man1/tollgate.1
TOLLGATE=$PREFIX/$BINDIR/tollgate

# help_tree: walks `tollgate [WORDS...] --help` from the top and prints what the CLI offers,
# one '|'-separated line each (not tabs: `read` would merge an empty PATH away) (PATH is the words after `tollgate`, empty at the top):
#   cmd   PATH NAME ALIASES...   a command or subcommand (NAME is its primary name)
#   group PATH NAME              one with subcommands of its own (limits, lock)
#   opt   PATH --OPTION          a long option (--help left out: every command has it)
help_section() { awk -v s="$1:" '$0 == s { f = 1; next } f && /^[^ ]/ { f = 0 } f && NF'; }
help_tree() {
    local help opt line names primary subs
    help=$("$TOLLGATE" "$@" --help 2>&1) || { echo "error|$*|--help failed"; return; }
    for opt in $(help_section Options <<<"$help" | grep -oE '^ +(-[A-Za-z0-9],)?--[A-Za-z0-9-]+' \
        | grep -oE -- '--[A-Za-z0-9-]+'); do
        [ "$opt" = --help ] || printf 'opt|%s|%s\n' "$*" "$opt"
    done
    subs=$(help_section Subcommands <<<"$help")
    [ -z "$subs" ] || [ $# -eq 0 ] || printf 'group|%s|%s\n' "${*:1:$#-1}" "${!#}"
    (($# < 4)) || { echo "error|$*|nested too deep"; return; }
    while IFS= read -r line; do
        [ -n "$line" ] || continue # <<< of an empty string still gives one (empty) line
        names=$(sed -E 's/^ +//; s/  +.*$//; s/,/ /g; s/  */ /g' <<<"$line") # "try-acquire try"
        primary=${names%% *}
        printf 'cmd|%s|%s\n' "$*" "$names"
        help_tree "$@" "$primary"
    done <<<"$subs"
}
HELP_TREE=$(help_tree)
grep -q '^cmd' <<<"$HELP_TREE" || fail "could not read the commands from 'tollgate --help'"
if grep -q '^error' <<<"$HELP_TREE"; then
    fail "tollgate --help: $(grep '^error' <<<"$HELP_TREE" | cut -d'|' -f2- | tr '\n|' '; ')"
fi

# man_coverage PAGE: prints one line per command, alias, long option or exit code that the
# help tree lists and PAGE does not document. Commands and aliases need a
# `.SS "tollgate CMD ..."` entry (a group such as `limits` or `lock` is documented by its
# subcommands' entries); options need to appear in the page; exit codes (from the "Exit codes:"
# line of `tollgate --help`) need a `.B N` tag in EXIT STATUS.
man_coverage() {
    local src headers kind path names primary cmd hdr name codes exitsec code
    src=$(sed 's/\\-/-/g; s/\\f[BIRP]//g' "$1")
    headers=$(sed -n 's/^\.SS "\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' <<<"$src")
    while IFS='|' read -r kind path names; do
        case $kind in
        opt)
            grep -qF -- "$names" <<<"$src" \
                || echo "option $names of 'tollgate${path:+ $path}' is not in the man page"
            ;;
        cmd)
            primary=${names%% *}
            cmd="tollgate${path:+ $path} $primary"
            grep -qxF "group|$path|$primary" <<<"$HELP_TREE" && continue
            hdr=$(grep -E "^$cmd( |$)" <<<"$headers" | head -n1 || true)
            if [ -z "$hdr" ]; then
                echo "command '$cmd' has no entry (.SS) in the man page"
                continue
            fi
            for name in $names; do
                grep -qw -- "$name" <<<"$hdr" || echo "alias '$name' of '$cmd' is not in its man entry"
            done
            ;;
        esac
    done <<<"$HELP_TREE"
    codes=$("$TOLLGATE" --help | sed -n 's/^Exit codes: //p' | grep -oE '(^|, )[0-9]+ ' | grep -oE '[0-9]+' || true)
    [ -n "$codes" ] || echo "'tollgate --help' lists no exit codes (expected a line 'Exit codes: 0 ok, 1 ...')"
    exitsec=$(awk '/^\.SH/ { f = ($0 ~ /EXIT STATUS/) } f' <<<"$src")
    for code in $codes; do
        grep -qx "\.B $code" <<<"$exitsec" || echo "exit code $code is not in the man page's EXIT STATUS"
    done
}

if [ -f "$MAN" ]; then
    check
    rendered=$(MANPAGER=cat MANWIDTH=80 man -l "$MAN" 2>/dev/null) || fail "man -l cannot render tollgate.1"
    check
    grep -q "EXIT STATUS" <<<"$rendered" || fail "the rendered man page has no EXIT STATUS section"
    check
    warnings=$(MANPAGER=cat MANWIDTH=80 man --warnings -l "$MAN" 2>&1 >/dev/null || true)
    [ -z "$warnings" ] || fail "man --warnings: $warnings"
    check
    warnings=$(groff -ww -z -man "$MAN" 2>&1 || true)
    [ -z "$warnings" ] || fail "groff -ww: $warnings"
    check
    version=$("$TOLLGATE" --version | awk '{ print $NF }')
    grep -q "^\.TH TOLLGATE 1 .*\"Tollgate $version\"" "$MAN" \
        || fail "the man page's .TH does not name Tollgate $version (tollgate --version)"

    # The checker first sees a page with one command, one option and one exit code cut out:
    # it must notice all three, or its silence on the real page proves nothing.
    check
    sed -e '/^\.SS "tollgate release\\-stale/,/^\.SS/{/^\.SS "tollgate release\\-stale/d}' \
        -e 's/\\-\\-overdue/--OVERDUE/g' \
        -e '/^\.SH EXIT STATUS/,/^\.SH/{/^\.B 3$/d}' "$MAN" >"$WORK/doctored.1"
    doctored=$(man_coverage "$WORK/doctored.1")
    for want in "command 'tollgate release-stale'" "option --overdue" "exit code 3"; do
        grep -qF "$want" <<<"$doctored" \
            || fail "the man coverage check missed a cut-out entry ($want); it said: ${doctored:-nothing}"
    done
    check
    missing=$(man_coverage "$MAN")
    [ -z "$missing" ] || fail "the man page is behind 'tollgate --help':"$'\n'"$(sed 's/^/      /' <<<"$missing")"
fi

# Bash completion, driven in a clean shell as bash would at <TAB>.
COMPLETION=$PREFIX/$DATADIR/bash-completion/completions/tollgate
if [ -f "$COMPLETION" ]; then
    check
    bash -n "$COMPLETION" 2>"$WORK/bash-n.log" || fail "bash -n: $(cat "$WORK/bash-n.log")"
    complete_line() { # LINE -> the COMPREPLY words, one a line
        PATH="$PREFIX/$BINDIR:$PATH" HOME="$WORK/userhome" TOLLGATE_HOME= XDG_STATE_HOME= \
            bash --norc --noprofile -c '
            source "$1" || exit 1
            spec=$(complete -p tollgate) || exit 1
            func=$(sed -n "s/.*-F \([^ ]*\).*/\1/p" <<<"$spec")
            line=$2
            read -ra COMP_WORDS <<<"$line"
            [[ $line == *" " ]] && COMP_WORDS+=("")
            COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
            COMP_LINE=$line
            COMP_POINT=${#line}
            "$func" tollgate "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
            printf "%s\n" "${COMPREPLY[@]}"' _ "$COMPLETION" "$1"
    }
    check
    got=$(complete_line "tollgate st" 2>&1) || true
    [ "$got" = "status" ] || fail "completing 'tollgate st' gave '$got', not 'status'"
    check
    got=$(complete_line "tollgate limits s" 2>&1 | tr '\n' ' ') || true
    [ "$got" = "set show " ] || fail "completing 'tollgate limits s' gave '$got'"
    check
    got=$(complete_line "tollgate acquire --ti" 2>&1) || true
    [ "$got" = "--timeout" ] || fail "completing 'tollgate acquire --ti' gave '$got'"
    # Every command, alias and long option of the help tree is offered: `tollgate PATH <TAB>`
    # lists the (sub)commands, `tollgate PATH CMD -<TAB>` the options.
    check
    missing=()
    declare -A offered=()
    while IFS='|' read -r kind path names; do
        case $kind in
        cmd) key="tollgate${path:+ $path} " ;;
        opt) key="tollgate${path:+ $path} -" ;;
        *) continue ;;
        esac
        [ -n "${offered[$key]+set}" ] || offered[$key]=" $(complete_line "$key" 2>/dev/null | tr '\n' ' ')"
        for name in $names; do
            [[ ${offered[$key]} == *" $name "* ]] || missing+=("'$key<TAB>' does not offer $name")
        done
    done <<<"$HELP_TREE"
    ((${#missing[@]} == 0)) || fail "the completion is behind 'tollgate --help': ${missing[*]}"
    HOME_DIR=$WORK/home
    check
    if "$PREFIX/$BINDIR/tollgate" limits set installcheck-api --requests 5 --home "$HOME_DIR" -q; then
        got=$(complete_line "tollgate --home $HOME_DIR acquire inst" 2>&1) || true
        [ "$got" = "installcheck-api" ] || fail "completing a provider gave '$got', not 'installcheck-api'"
    else
        fail "the installed tollgate cannot set limits in $HOME_DIR"
    fi
    check
    complete_line "tollgate --home $WORK/no-home pause " >/dev/null 2>&1 || true
    [ ! -e "$WORK/no-home" ] || fail "completing providers created the home $WORK/no-home"
    check
    complete_line "tollgate resume " >/dev/null 2>&1 || true # the default home, under HOME
    [ ! -e "$WORK/userhome" ] || fail "completing providers created files under HOME"
fi

if ((${#failures[@]})); then
    echo "installcheck: ${#failures[@]} of $checks checks failed:" >&2
    printf '  - %s\n' "${failures[@]}" >&2
    exit 1
fi
echo "installcheck: ok ($checks checks, installed into a temporary prefix)"
