'use strict';
// Finds and loads the addon (tollgate.node, built by CMake with the rest of Tollgate), in this
// order: $TOLLGATE_NODE_ADDON; the build tree of the repository this package sits in
// (build/clients/node, as scripts/bootstrap.sh builds it: `npm install ./clients/node` links
// the package to the repository, so this path holds); the installed addon
// (cmake --install: <prefix>/lib/tollgate/node or <prefix>/lib/<multiarch>/tollgate/node).
const fs = require('fs');
const path = require('path');
const errors = require('./errors');

function candidates() {
    const list = [];
    if (process.env.TOLLGATE_NODE_ADDON) return [path.resolve(process.env.TOLLGATE_NODE_ADDON)];
    list.push(path.join(__dirname, '..', '..', '..', 'build', 'clients', 'node', 'tollgate.node'));
    for (const prefix of ['/usr/local', '/usr']) {
        list.push(path.join(prefix, 'lib', 'tollgate', 'node', 'tollgate.node'));
        list.push(path.join(prefix, 'lib', `${process.arch === 'x64' ? 'x86_64' : process.arch === 'arm64'
            ? 'aarch64' : process.arch}-linux-gnu`, 'tollgate', 'node', 'tollgate.node'));
    }
    return list;
}

function load() {
    const tried = candidates();
    const found = tried.find((p) => fs.existsSync(p));
    if (!found) {
        throw new Error('tollgate: the addon tollgate.node was not found (build Tollgate with CMake, or set '
            + 'TOLLGATE_NODE_ADDON to its path); looked at: ' + tried.join(', '));
    }
    const addon = require(found);
    addon.setErrorFactory(errors.fromStatus);
    return addon;
}

module.exports = load();
