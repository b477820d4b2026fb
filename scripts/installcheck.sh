#!/usr/bin/env bash
# installcheck.sh [BUILD_DIR]: installs an already configured and built tree (default ./build)
# into a fresh temporary prefix with `cmake --install`, and checks what a user gets:
#   - every expected file is there, the programs executable and runnable from the prefix;
#   - desktop-file-validate passes on the .desktop file, whose Exec and Icon name installed files;
#   - the man page renders with `man -l` and `man --warnings` says nothing;
#   - the bash completion parses (bash -n), completes `tollgate st<TAB>` to `status`, offers the
#     providers of the --home on the line, and creates no home while doing so;
#   - appstreamcli validates the metainfo (when the appstream package is installed).
# Configures and builds nothing itself. Exit 0 when all hold; else lists every failure, exit 1.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
APP_ID=io.github.tollgate.Dashboard

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    echo "installcheck: $BUILD is not a configured build directory (run scripts/bootstrap.sh)" >&2
    exit 2
fi
for tool in desktop-file-validate man; do
    if ! command -v "$tool" >/dev/null; then
        echo "installcheck: $tool is missing (Debian packages desktop-file-utils, man-db)" >&2
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
DATADIR=$(cache CMAKE_INSTALL_DATAROOTDIR)
GUI=$(cache TOLLGATE_BUILD_GUI)
: "${BINDIR:=bin}" "${MANDIR:=share/man}" "${DATADIR:=share}"

expect_file() {
    check
    [ -f "$PREFIX/$1" ] && [ -s "$PREFIX/$1" ] || fail "missing or empty: $1"
}
expect_exec() {
    check
    [ -f "$PREFIX/$1" ] && [ -x "$PREFIX/$1" ] || fail "missing or not executable: $1"
}

expect_exec "$BINDIR/tollgate"
expect_file "$MANDIR/man1/tollgate.1"
expect_file "$DATADIR/bash-completion/completions/tollgate"
DESKTOP=$DATADIR/applications/$APP_ID.desktop
METAINFO=$DATADIR/metainfo/$APP_ID.metainfo.xml
if [[ $GUI == ON || $GUI == TRUE || $GUI == 1 ]]; then
    expect_exec "$BINDIR/tollgate-dashboard"
    expect_file "$DESKTOP"
    expect_file "$METAINFO"
    expect_file "$DATADIR/icons/hicolor/scalable/apps/$APP_ID.svg"
    expect_file "$DATADIR/icons/hicolor/256x256/apps/$APP_ID.png"
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
if [ -f "$PREFIX/$METAINFO" ] && command -v appstreamcli >/dev/null; then
    check
    if ! out=$(appstreamcli validate --no-net "$PREFIX/$METAINFO" 2>&1); then
        fail "appstreamcli validate: $out"
    fi
fi

# Man page: renders, without a single warning.
MAN=$PREFIX/$MANDIR/man1/tollgate.1
if [ -f "$MAN" ]; then
    check
    rendered=$(MANPAGER=cat MANWIDTH=80 man -l "$MAN" 2>/dev/null) || fail "man -l cannot render tollgate.1"
    check
    grep -q "EXIT STATUS" <<<"$rendered" || fail "the rendered man page has no EXIT STATUS section"
    check
    warnings=$(MANPAGER=cat MANWIDTH=80 man --warnings -l "$MAN" 2>&1 >/dev/null || true)
    [ -z "$warnings" ] || fail "man --warnings: $warnings"
    # Every command of `tollgate --help` is in the page.
    check
    for cmd in $("$PREFIX/$BINDIR/tollgate" --help | awk '/^Subcommands:/{f=1;next} f&&NF{print $1}'); do
        grep -q "tollgate ${cmd}\b" <<<"$rendered" || fail "the man page does not describe '$cmd'"
    done
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
