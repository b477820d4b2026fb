'use strict';
// Fixtures of the Node client's tests (run by ctest as node_client: tests/CMakeLists.txt sets
// TOLLGATE_NODE_ADDON, TOLLGATE_CLI, TOLLGATE_MOCK_PROVIDER and TOLLGATE_SDK_MODULES; by hand,
// set them to a build's files).
const { execFileSync, spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const readline = require('readline');

// A fresh home of the test's own (TOLLGATE_HOME set to it, so tollgate.call finds it) and the CLI on it.
function freshHome(t) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-node-'));
    const home = path.join(dir, 'home');
    process.env.TOLLGATE_HOME = home;
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const cli = (...args) => {
        if (!process.env.TOLLGATE_CLI) throw new Error('TOLLGATE_CLI names no tollgate binary');
        return execFileSync(process.env.TOLLGATE_CLI, args, { env: { ...process.env, TOLLGATE_HOME: home },
            encoding: 'utf8', timeout: 60000 });
    };
    const provider = (name) => JSON.parse(cli('status', '--json')).providers.find((p) => p.provider === name);
    return { dir, home, cli, provider };
}

// The test mock provider (tests/helpers/mockprovider.js): its base URL, its stats, stopped after the test.
async function startMock(t, ...args) {
    const script = process.env.TOLLGATE_MOCK_PROVIDER;
    if (!script) throw new Error('TOLLGATE_MOCK_PROVIDER names no mock provider');
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    t.after(() => child.kill('SIGKILL'));
    const line = await new Promise((resolve, reject) => {
        const rl = readline.createInterface({ input: child.stdout });
        rl.once('line', (l) => { rl.close(); resolve(l); });
        child.once('exit', (code) => reject(new Error('the mock provider exited: ' + code)));
    });
    const url = 'http://127.0.0.1:' + Number(line.trim());
    const stats = async () => (await fetch(url + '/_stats')).json();
    return { url, stats };
}

// An SDK from tests/sdk/node_modules (installed by scripts/test.sh with npm ci).
function sdk(name) {
    const dir = process.env.TOLLGATE_SDK_MODULES;
    return dir && fs.existsSync(path.join(dir, name)) ? require(path.join(dir, name)) : null;
}

module.exports = { freshHome, startMock, sdk };
