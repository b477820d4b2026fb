// The latency `tollgate proxy` adds, measured as SDK clients use it: keep-alive connections
// (Node's http.Agent, like the SDKs' fetch), C requests in flight at once, N in all. Prints
// "p50 p99 p50 p99" in ms: time to first byte, then to the full answer.
//   node bench/proxyload.js URL C N BODY
'use strict';
const http = require('http');
const [url, cArg, nArg, body] = process.argv.slice(2);
const target = new URL(url + '/v1/messages');
const C = Number(cArg);
const N = Number(nArg);
const agent = new http.Agent({ keepAlive: true, maxSockets: C });
const first = [];
const full = [];

function one() {
    return new Promise((resolve, reject) => {
        const t0 = process.hrtime.bigint();
        const req = http.request({ host: target.hostname, port: target.port, path: target.pathname, method: 'POST', agent,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
            let t1 = 0n;
            res.on('data', () => { if (!t1) t1 = process.hrtime.bigint(); });
            res.on('end', () => {
                const t2 = process.hrtime.bigint();
                first.push(Number((t1 || t2) - t0) / 1e6);
                full.push(Number(t2 - t0) / 1e6);
                if (res.statusCode !== 200) reject(new Error('status ' + res.statusCode));
                else resolve();
            });
        });
        req.on('error', reject);
        req.end(body);
    });
}

async function worker(count) {
    for (let i = 0; i < count; i++) await one();
}

function pct(v, p) {
    const s = [...v].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))].toFixed(2);
}

(async () => {
    const per = Math.ceil(N / C);
    await Promise.all(Array.from({ length: C }, () => worker(per)));
    process.stdout.write([pct(first, 50), pct(first, 99), pct(full, 50), pct(full, 99)].join(' ') + '\n');
    agent.destroy();
})().catch((e) => { process.stderr.write(String(e) + '\n'); process.exit(1); });
