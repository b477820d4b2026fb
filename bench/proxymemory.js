// The abusive request bodies of bench/proxymemory.sh (issue 26, item 5), and the provider they
// go to. Two modes:
//   node bench/proxymemory.js sink
//       an HTTP server on a free loopback port (printed on the first line) that reads every
//       request body, keeps only its length and a running hash of it, and answers 200 with an
//       Anthropic-style message; GET /_seen lists {bytes, sha256} per body received.
//   node bench/proxymemory.js send URL SHAPE MIB CONCURRENT
//       CONCURRENT requests at once, each a POST URL/v1/messages with a Content-Length body of
//       MIB MiB made on the fly (never held whole here), shaped as SHAPE:
//         content   {"model":…,"max_tokens":…,"messages":[{"role":"user","content":"aaa…"}]}
//         system    {"model":…,"max_tokens":…,"system":"aaa…"}  (a top-level member's string)
//         late      {"messages":[{"role":"user","content":"aaa…"}],"max_tokens":…,"model":…}
//       Prints one line per request: its status and the sha256 of the body it sent.
'use strict';
const http = require('http');
const crypto = require('crypto');

function sink() {
    const seen = [];
    const server = http.createServer((req, res) => {
        if (req.method === 'GET' && req.url === '/_seen') {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify(seen));
            return;
        }
        const hash = crypto.createHash('sha256');
        let bytes = 0;
        req.on('data', (d) => { bytes += d.length; hash.update(d); });
        req.on('end', () => {
            seen.push({ bytes, sha256: hash.digest('hex') });
            const body = JSON.stringify({ id: 'msg_bench', type: 'message', role: 'assistant', model: 'bench-model',
                content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn',
                usage: { input_tokens: 10, output_tokens: 1 } });
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
            res.end(body);
        });
    });
    server.requestTimeout = 0;
    server.listen(0, '127.0.0.1', () => console.log(server.address().port));
}

// The body's three parts: what comes before the string, the string's length, what follows.
function shapeOf(shape, total) {
    const fields = '"model":"bench-model","max_tokens":16';
    const parts = {
        content: ['{' + fields + ',"messages":[{"role":"user","content":"', '"}]}'],
        system: ['{' + fields + ',"system":"', '"}'],
        late: ['{"messages":[{"role":"user","content":"', '"}],' + fields + '}'],
    }[shape];
    if (!parts) throw new Error('unknown shape ' + shape);
    return { head: Buffer.from(parts[0]), fill: total - parts[0].length - parts[1].length, tail: Buffer.from(parts[1]) };
}

function sendOne(url, shape, total) {
    return new Promise((resolve) => {
        const target = new URL(url + '/v1/messages');
        const { head, fill, tail } = shapeOf(shape, total);
        const hash = crypto.createHash('sha256');
        const req = http.request({ host: target.hostname, port: target.port, path: target.pathname, method: 'POST',
            headers: { 'content-type': 'application/json', 'content-length': total, 'anthropic-version': '2023-06-01' } },
        (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode + ' ' + hash.digest('hex')));
        });
        req.on('error', (e) => resolve('error ' + e.code));
        const block = Buffer.alloc(1 << 20, 'a');
        let left = fill;
        const put = (b) => { hash.update(b); return req.write(b); };
        put(head);
        const more = () => {
            while (left > 0) {
                const b = left >= block.length ? block : block.subarray(0, left);
                left -= b.length;
                if (!put(b)) { req.once('drain', more); return; }
            }
            put(tail);
            req.end();
        };
        more();
    });
}

async function send(url, shape, mib, concurrent) {
    const total = Number(mib) * 1024 * 1024;
    const all = [];
    for (let i = 0; i < Number(concurrent); ++i)
        all.push(sendOne(url, shape, total));
    for (const line of await Promise.all(all))
        console.log(line);
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === 'sink') sink();
else if (mode === 'send') send(...rest);
else { console.error('usage: proxymemory.js sink | send URL SHAPE MIB CONCURRENT'); process.exit(2); }
