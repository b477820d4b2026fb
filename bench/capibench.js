// capibench.js HOME CALLS: the same calls as bench/capibench.c through the Node client
// (clients/node; its addon from TOLLGATE_NODE_ADDON). Prints "row NAME median_us p99_us n" lines.
// Every call finds room here, so an admission is the addon's try on the JS thread and a resolved
// promise; the thread that a wait for room takes (clients/node/src/nodecall.h) is not measured.
'use strict';
const path = require('path');
const tollgate = require(path.join(__dirname, '..', 'clients', 'node'));

function row(name, values) {
    values.sort((a, b) => a - b);
    console.log(`row ${name} ${values[values.length >> 1].toFixed(1)} ${values[Math.floor(values.length * 99 / 100)].toFixed(1)} ${values.length}`);
}

const nowUs = () => Number(process.hrtime.bigint()) / 1000;

async function main() {
    const [home, callsArg] = process.argv.slice(2);
    const calls = Number(callsArg);
    const h = tollgate.openHome(home);
    const ask = { caller: 'capibench.js', inputTokens: 10, maxTokens: 10, slot: false, timeoutMs: 10000 };
    const usage = { inputTokens: 10, outputTokens: 10 };
    for (let i = 0; i < calls; i++) { // a warm-up pass, untimed (as capibench.c does)
        const c = await h.call('bench', ask);
        c.settle(usage);
        c.free();
    }
    const admit = [];
    const cycle = [];
    for (let i = 0; i < calls; i++) {
        const t0 = nowUs();
        const c = h.newCall('bench', ask);
        const t1 = nowUs();
        await c.admit({ timeoutMs: 10000 });
        const t2 = nowUs();
        c.settle(usage);
        c.free();
        const t3 = nowUs();
        admit.push(t2 - t1);
        cycle.push(t3 - t0);
    }
    row('node_admit', admit);
    row('node_call', cycle);
    const whole = [];
    for (let i = 0; i < calls; i++) {
        const t0 = nowUs();
        const c = await tollgate.call('bench', { ...ask, home });
        c.settle(usage);
        c.free();
        whole.push(nowUs() - t0);
    }
    row('node_await_call', whole);
}

main().catch((e) => {
    console.error('capibench.js:', e);
    process.exit(1);
});
