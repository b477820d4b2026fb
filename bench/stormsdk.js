// Clients of an official SDK (tests/sdk/node_modules), for bench/stormsdk.sh: CLIENTS clients at
// once, each making CALLS streamed calls one after the other, with the SDK's default retries.
//   node bench/stormsdk.js anthropic|openai PROXY_URL CLIENTS CALLS
// Each client is its own SDK instance named by X-Tollgate-Caller: sdk-N (as separate processes
// would be told apart). Every HTTP attempt the SDK makes goes through a fetch of our own that
// records its answer's status, its Retry-After / retry-after-ms and who answered (the proxy's
// own refusals say `Server: tollgate-proxy`; a 429 relayed from the provider does not), so the
// SDK's hidden retries are seen. Prints one JSON summary: the wall time from the first call's
// start to the last call's end, calls done and failed (after the SDK's retries), every attempt.
'use strict';
const path = require('path');
const [kind, proxyUrl, clientsArg, callsArg] = process.argv.slice(2);
const CLIENTS = Number(clientsArg || 8);
const CALLS = Number(callsArg || 4);
const SDK_DIR = path.join(__dirname, '..', 'tests', 'sdk', 'node_modules');
const pkg = kind === 'openai' ? 'openai' : '@anthropic-ai/sdk';

async function main() {
    const { default: Sdk } = await import(path.join(SDK_DIR, pkg, 'index.js'));
    const version = require(path.join(SDK_DIR, pkg, 'package.json')).version;
    const t0 = Date.now();
    const attempts = []; // { client, t (ms from t0), status, server, retryAfterMs }
    const summary = { sdk: pkg + ' ' + version, clients: CLIENTS, callsEach: CALLS, calls: 0, failures: 0, errors: [],
        callMs: [] };
    function recordingFetch(client) {
        return async (url, init) => {
            const started = Date.now() - t0;
            const res = await fetch(url, init);
            const h = res.headers;
            let retryAfterMs = null;
            if (h.get('retry-after-ms')) retryAfterMs = Number(h.get('retry-after-ms'));
            else if (h.get('retry-after')) {
                const s = Number(h.get('retry-after'));
                retryAfterMs = Number.isNaN(s) ? Date.parse(h.get('retry-after')) - Date.now() : s * 1000;
            }
            attempts.push({ client, t: started, status: res.status, server: h.get('server') || '', retryAfterMs });
            return res;
        };
    }
    async function client(n) {
        const options = { apiKey: 'sk-bench', timeout: 600000, fetch: recordingFetch(n),
            defaultHeaders: { 'x-tollgate-caller': 'sdk-' + n } }; // default retries (2)
        const sdk = kind === 'openai' ? new Sdk(Object.assign({ baseURL: proxyUrl + '/v1' }, options))
            : new Sdk(Object.assign({ baseURL: proxyUrl }, options));
        for (let c = 0; c < CALLS; c++) {
            const started = Date.now();
            const prompt = 'client ' + n + ' call ' + c;
            let text = '';
            try {
                if (kind === 'openai') {
                    const stream = await sdk.chat.completions.create({ model: 'gpt-mock', max_completion_tokens: 64,
                        stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: prompt }] });
                    for await (const ch of stream) if (ch.choices.length && ch.choices[0].delta.content) text += ch.choices[0].delta.content;
                } else {
                    const stream = await sdk.messages.create({ model: 'claude-mock', max_tokens: 64, stream: true,
                        messages: [{ role: 'user', content: prompt }] });
                    for await (const ev of stream) if (ev.type === 'content_block_delta') text += ev.delta.text;
                }
                if (!text) throw new Error('empty answer');
                summary.calls++;
                summary.callMs.push(Date.now() - started);
            } catch (e) {
                summary.failures++;
                if (summary.errors.length < 5) summary.errors.push('client ' + n + ' call ' + c + ': ' + String(e && e.message || e).slice(0, 300));
            }
        }
    }
    await Promise.all(Array.from({ length: CLIENTS }, (_, n) => client(n)));
    summary.t0 = t0;
    summary.wallMs = Date.now() - t0;
    summary.callMs.sort((a, b) => a - b);
    summary.attempts = attempts;
    process.stdout.write(JSON.stringify(summary) + '\n');
}
main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
