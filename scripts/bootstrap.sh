#!/usr/bin/env bash
# Sets everything up on a Debian 12 machine: installs the Debian packages Tollgate needs
# (only those missing, with sudo when not root), configures and builds with CMake.
# Idempotent, and quick when everything is already there.
#
#   scripts/bootstrap.sh            # packages + configure + build into ./build
#   TOLLGATE_BUILD_DIR=dir scripts/bootstrap.sh
#   TOLLGATE_CMAKE_ARGS="-D..." scripts/bootstrap.sh   # CMake options, applied to an existing tree too
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${TOLLGATE_BUILD_DIR:-$ROOT/build}
JOBS=${TOLLGATE_JOBS:-2}

PACKAGES=(
    cmake ninja-build g++ pkg-config
    qt6-base-dev qt6-charts-dev qt6-qpa-plugins fonts-dejavu-core
    nlohmann-json3-dev libcli11-dev
    # per-day limits that reset at a wall-clock time in a time zone: the date library and tzdata
    libhowardhinnant-date-dev tzdata
    # Redis homes: the hiredis client, and a redis-server the tests start on a private port
    libhiredis-dev redis-server
    # OpenSSL: the SHA1 that names a Redis script (EVALSHA without a SCRIPT LOAD round trip)
    libssl-dev
    # the TLS recipe for managed Redis (README): stunnel in front of a TLS-only redis-server,
    # with certificates the test makes with the openssl command
    stunnel4 openssl
    # `tollgate proxy`: HTTP and TLS by Boost.Beast/Asio (header-only) with OpenSSL; its tests
    # run a Node mock provider (no npm packages) and curl as a client
    libboost1.81-dev nodejs curl
    # the multi-host test: network namespaces joined by veth pairs (ip), nsenter/unshare
    iproute2 util-linux
    # the icon set (QtSvg and its icon engine plugin); desktop notifications use QtDBus
    qt6-svg-dev libqt6svg6
    # tests and scripts/installcheck.sh: a private D-Bus, the desktop file and metainfo
    # validators, man and groff for the man page
    dbus desktop-file-utils appstream man-db groff-base
    # the dashboard's display check is tested against a real X server
    xvfb
    # the Python client (clients/python, stdlib only) is tested with pytest, its httpx
    # transport with httpx (the HTTP client of the official Anthropic and OpenAI Python SDKs)
    python3 python3-pytest python3-httpx
)

"$ROOT/scripts/ensure-packages.sh" "${PACKAGES[@]}"
# The Node addon (clients/node) is built against Node-API's headers: NodeSource's nodejs ships
# them in /usr/include/node; with Debian's own nodejs they come in libnode-dev.
if [ ! -f /usr/include/node/node_api.h ]; then
    "$ROOT/scripts/ensure-packages.sh" libnode-dev
fi

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${TOLLGATE_CMAKE_ARGS:-}
elif [ -n "${TOLLGATE_CMAKE_ARGS:-}" ]; then
    # Options asked for now win over the cached ones (scripts/test.sh sets some for ./build).
    cmake -S "$ROOT" -B "$BUILD_DIR" ${TOLLGATE_CMAKE_ARGS}
fi
cmake --build "$BUILD_DIR" -j"$JOBS"
