'use strict';
// The README's Node section as a user meets it: its install line (npm install of this package
// from the repository, offline: it has no dependencies) in a fresh directory, then its example
// run there as it is shown.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { freshHome } = require('./support');

const PACKAGE = path.resolve(__dirname, '..');
const README = path.resolve(PACKAGE, '..', '..', 'README.md');

// npm comes with NodeSource's nodejs; scripts/test.sh installs Debian's npm where it does not.
const npmMissing = (() => {
    try {
        execFileSync('npm', ['--version'], { stdio: 'ignore', timeout: 60000 });
        return false;
    } catch {
        return 'no npm on PATH';
    }
})();

test('the README example runs after the README install line', { skip: npmMissing }, (t) => {
    const h = freshHome(t);
    const text = fs.readFileSync(README, 'utf8');
    const section = text.slice(text.indexOf('## In-process: Node'));
    const install = /```sh\n(npm install [^\n]*)\n/.exec(section)[1];
    assert.match(install, /^npm install \.\/clients\/node\b/);
    const example = /```js\n([\s\S]*?)```/.exec(section)[1];
    assert.match(example, /tollgate\.call\(/);

    const app = path.join(h.dir, 'app');
    fs.mkdirSync(app);
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', PACKAGE],
        { cwd: app, stdio: ['ignore', 'ignore', 'inherit'], timeout: 120000 });
    fs.writeFileSync(path.join(app, 'example.js'), example);
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--window', '60');
    const out = execFileSync(process.execPath, ['example.js'], { cwd: app, encoding: 'utf8', timeout: 60000,
        env: { ...process.env, TOLLGATE_HOME: h.home } });
    assert.equal(out.trim(), String(1187 + 412));
});
