'use strict';
// index.d.ts type-checks (tsc --noEmit --strict) a program that uses it as the README does, with
// the official SDKs' own types: the TypeScript of tests/sdk (pinned by its package-lock.json).
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const modules = process.env.TOLLGATE_SDK_MODULES;
const tsc = modules && path.join(modules, 'typescript', 'bin', 'tsc');
const skip = !tsc || !fs.existsSync(tsc) ? 'TOLLGATE_SDK_MODULES holds no typescript' : false;

test('the declarations type-check a program that uses them', { skip }, (t) => {
    const dir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'tollgate-ts-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const program = path.join(__dirname, 'typescript', 'usage.ts');
    // The SDKs (and their types) resolve to tests/sdk's node_modules through `paths`.
    fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
        files: [program],
        compilerOptions: { strict: true, noEmit: true, target: 'es2022', module: 'commonjs', moduleResolution: 'node10',
            esModuleInterop: true, skipLibCheck: true, types: [], lib: ['es2022', 'dom', 'dom.iterable', 'esnext.disposable'],
            baseUrl: modules, paths: { '*': [path.join(modules, '*')] } },
    }));
    let out = '';
    try {
        out = execFileSync(process.execPath, [tsc, '-p', dir], { encoding: 'utf8', cwd: dir, timeout: 120000 });
    } catch (e) {
        assert.fail('tsc: ' + (e.stdout || '') + (e.stderr || ''));
    }
    assert.equal(out.trim(), '');
});
