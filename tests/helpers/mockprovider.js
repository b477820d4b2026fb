// A loopback stand-in for a provider's API, for the proxy's tests (Node's own http module,
// no packages). It enforces its own quota and answers like Anthropic (/v1/messages) or OpenAI
// (/v1/chat/completions): rate-limit headers in each format, JSON or server-sent events with
// usage, and on request (header x-mock) a 429 with or without retry-after, a spend cap, a 529,
// a slow stream, or a stream cut off in the middle.
//   node mockprovider.js [--limit N --window-ms MS] [--delay-ms MS]
// Prints its port on the first line of stdout. GET /_stats: what it saw.
'use strict';
const http = require('http');

const args = process.argv.slice(2);
const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : dflt;
};
const LIMIT = opt('--limit', 1000000);
const WINDOW_MS = opt('--window-ms', 60000);
const DELAY_MS = opt('--delay-ms', 0);

const stats = { requests: 0, refused: 0, concurrent: 0, maxConcurrent: 0, outputTokens: 0, callers: {}, aborted: 0,
    acceptEncoding: [] };
let admitted = []; // times of admitted requests in the window

function quota(now) {
    admitted = admitted.filter((t) => t > now - WINDOW_MS);
    const resetMs = admitted.length ? admitted[0] + WINDOW_MS : now;
    return { remaining: Math.max(0, LIMIT - admitted.length), resetMs };
}

function headersFor(kind, now) {
    const q = quota(now);
    if (kind === 'anthropic') {
        return {
            'anthropic-ratelimit-requests-limit': String(LIMIT),
            'anthropic-ratelimit-requests-remaining': String(q.remaining),
            'anthropic-ratelimit-requests-reset': new Date(q.resetMs).toISOString(),
        };
    }
    return {
        'x-ratelimit-limit-requests': String(LIMIT),
        'x-ratelimit-remaining-requests': String(q.remaining),
        'x-ratelimit-reset-requests': Math.max(0, q.resetMs - now) + 'ms',
    };
}

function error(res, status, headers, type, message) {
    res.writeHead(status, Object.assign({ 'content-type': 'application/json' }, headers));
    res.end(JSON.stringify({ type: 'error', error: { type, message } }));
}

const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/_stats') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(stats));
        return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
        const now = Date.now();
        const kind = req.url.startsWith('/v1/messages') ? 'anthropic' : 'openai';
        const mock = req.headers['x-mock'] || '';
        stats.requests++;
        stats.acceptEncoding.push(req.headers['accept-encoding'] || '');
        const caller = req.headers['x-tollgate-caller'];
        if (caller) stats.callers[caller] = (stats.callers[caller] || 0) + 1; // must never arrive
        let body = {};
        try { body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}'); } catch (e) { body = null; }
        if (body === null) return error(res, 400, {}, 'invalid_request_error', 'body is not JSON');
        if (mock === '429') return error(res, 429, { 'retry-after': '7' }, 'rate_limit_error', 'rate limited (mock)');
        if (mock === '429-bare') return error(res, 429, {}, 'rate_limit_error', 'rate limited (mock)');
        if (mock === 'spendcap') {
            res.writeHead(429, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', code: 'insufficient_quota' } }));
            return;
        }
        if (mock === '529') return error(res, 529, {}, 'overloaded_error', 'Overloaded');
        if (quota(now).remaining === 0) {
            stats.refused++;
            const q = quota(now);
            return error(res, 429, Object.assign({ 'retry-after': String(Math.ceil((q.resetMs - now) / 1000)) }, headersFor(kind, now)),
                'rate_limit_error', 'over the mock provider quota');
        }
        admitted.push(now);
        stats.concurrent++;
        stats.maxConcurrent = Math.max(stats.maxConcurrent, stats.concurrent);
        const headers = headersFor(kind, now);
        const output = 5;
        let finished = false;
        const finish = () => { finished = true; stats.concurrent--; stats.outputTokens += output; };
        // The proxy closed the connection before the answer was complete (its client left).
        res.on('close', () => { if (!finished && mock !== 'cut') { stats.aborted++; stats.concurrent--; finished = true; } });
        const pieces = ['Hel', 'lo ', 'wor', 'ld'];
        const gap = mock === 'slow' ? 150 : DELAY_MS;
        if (!body.stream) {
            setTimeout(() => {
                res.writeHead(200, Object.assign({ 'content-type': 'application/json' }, headers));
                const usage = kind === 'anthropic' ? { input_tokens: 11, output_tokens: output }
                    : { prompt_tokens: 11, completion_tokens: output, total_tokens: 11 + output };
                res.end(JSON.stringify({ id: 'x', model: body.model, content: [{ type: 'text', text: pieces.join('') }], usage }));
                finish();
            }, gap);
            return;
        }
        res.writeHead(200, Object.assign({ 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }, headers));
        const events = [];
        if (kind === 'anthropic') {
            events.push({ type: 'message_start', message: { id: 'x', usage: { input_tokens: 11, output_tokens: 1 } } });
            for (const p of pieces) events.push({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: p } });
            events.push({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: output } });
            events.push({ type: 'message_stop' });
        } else {
            for (const p of pieces) events.push({ choices: [{ index: 0, delta: { content: p } }], usage: null });
            events.push({ choices: [], usage: { prompt_tokens: 11, completion_tokens: output, total_tokens: 11 + output } });
        }
        let i = 0;
        const next = () => {
            if (finished) return; // aborted
            if (mock === 'cut' && i === 2) { finished = true; res.socket.destroy(); stats.concurrent--; return; }
            if (i < events.length) {
                const e = events[i++];
                res.write((e.type ? 'event: ' + e.type + '\n' : '') + 'data: ' + JSON.stringify(e) + '\n\n');
                setTimeout(next, gap);
                return;
            }
            if (kind === 'openai') res.write('data: [DONE]\n\n');
            res.end();
            finish();
        };
        next();
    });
});
server.keepAliveTimeout = 5000;
server.listen(0, '127.0.0.1', () => {
    process.stdout.write(String(server.address().port) + '\n');
});
process.on('SIGTERM', () => process.exit(0));
