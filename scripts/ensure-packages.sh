#!/usr/bin/env bash
# ensure-packages.sh PKG...: installs the Debian packages among PKG that are missing (with
# sudo when not root). Quick and silent when all are there. Sourced or run by the other
# scripts, so the install logic lives in one place.
set -euo pipefail
missing=()
for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done
((${#missing[@]})) || exit 0
echo "installing missing Debian packages: ${missing[*]}" >&2
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "need root or sudo to install ${missing[*]}" >&2; exit 1; }
    SUDO=(sudo)
fi
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${missing[@]}" >&2
