// nodeworker: the Node client (clients/node) as one of tst_capi's callers.
//
//     node nodeworker.js HOME PROVIDER LOG TOKENS
//
// Admits, holds a few ms and settles calls until killed, logging each as capiworker.c does:
// "A LO HI TOKENS" (asked at LO, admitted by HI, µs), "B PID T" (holding from T), "E PID T" (still
// holding at T), each group in one write. Two calls run at once (the event loop is not blocked by
// a wait, so one process holds two places in the queue), each logged under its own id.
'use strict';
const fs = require('fs');
const tollgate = require(process.env.TOLLGATE_NODE_PACKAGE);

const [home, provider, logPath, tokensArg] = process.argv.slice(2);
const tokens = Number(tokensArg);

// CLOCK_MONOTONIC (libuv's hrtime), as every caller of tst_capi stamps its log: one clock for all
// (a wall clock computed from Node's time origin would drift from the others' if the wall clock is stepped).
const nowUs = () => Number(process.hrtime.bigint() / 1000n);

function log(text) {
    const fd = fs.openSync(logPath, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o600);
    try {
        fs.writeSync(fd, text);
    } finally {
        fs.closeSync(fd);
    }
}

async function loop(id) {
    for (;;) {
        const lo = nowUs();
        let call;
        try {
            call = await tollgate.call(provider, { caller: 'node-worker', inputTokens: Math.floor(tokens / 2),
                maxTokens: tokens - Math.floor(tokens / 2), timeoutMs: 20000, home });
        } catch (e) {
            if (e instanceof tollgate.Timeout || e instanceof tollgate.Refused) continue;
            throw e;
        }
        const hi = nowUs();
        log(`A ${lo} ${hi} ${tokens}\nB ${id} ${hi}\n`);
        await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 19));
        log(`E ${id} ${nowUs()}\n`);
        call.settle({ inputTokens: Math.floor(tokens / 2), outputTokens: tokens - Math.floor(tokens / 2) });
        call.free();
    }
}

for (const n of [1, 2]) {
    loop(`${process.pid}.${n}`).catch((e) => {
        process.stderr.write(`nodeworker: ${e.stack}\n`);
        process.exit(1);
    });
}
