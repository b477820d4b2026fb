// Real clients nobody here wrote: the official Anthropic or OpenAI Node SDK, pointed at
// `tollgate proxy` by its base URL, as an unmodified program would be. Run by tst_sdkclients.
//   node sdkclients.js anthropic|openai PROXY_URL MOCK_URL CLIENTS ROUNDS
// Starts CLIENTS clients at once; each makes ROUNDS plain and ROUNDS streamed calls. A
// streamed call asks the mock for a gated stream (it stops after its first text until this
// client, having received that text, opens the gate on the mock directly): a proxy that held
// the stream back would leave the gate shut. Prints one JSON summary; exits 1 on any failure.
//   node sdkclients.js openai-rules PROXY_URL MOCK_URL CLIENTS ROUNDS
// OpenAI clients against a mock that enforces OpenAI's own rules (mockprovider.js --openai-*):
// even clients use gpt-mock-chat (Chat Completions), odd ones gpt-mock-resp (the Responses API);
// each round is one plain and one streamed call. A call the proxy refuses itself (429, Server:
// tollgate-proxy: no room before its deadline, the day's budget spent) is counted per model in
// `refusedByProxy`; any other failure, a 429 of the mock's above all, is a failure.
'use strict';
const [kind, proxyUrl, mockUrl, clientsArg, roundsArg] = process.argv.slice(2);
const clients = Number(clientsArg || 8);
const rounds = Number(roundsArg || 1);
const KEY = 'sk-test-tollgate-key';

const summary = { sdk: '', calls: 0, streams: 0, usageTokens: 0, failures: [] };
const versionOf = (name) => JSON.parse(require('fs').readFileSync(
    require('path').join(__dirname, 'node_modules', name, 'package.json'), 'utf8')).version;

async function openGate(id) {
    const r = await fetch(mockUrl + '/_release?id=' + encodeURIComponent(id), { method: 'POST' });
    if (r.status !== 200) throw new Error('the gate of ' + id + ' was not waiting (' + r.status + ')');
}

async function anthropicClient(n) {
    const { default: Anthropic } = await import('@anthropic-ai/sdk');
    summary.sdk = '@anthropic-ai/sdk ' + versionOf('@anthropic-ai/sdk');
    // No retries: every answer the SDK sees is the one the proxy gave.
    const client = new Anthropic({ baseURL: proxyUrl, apiKey: KEY, maxRetries: 0, timeout: 120000 });
    for (let r = 0; r < rounds; r++) {
        const msg = await client.messages.create({ model: 'claude-mock', max_tokens: 64,
            messages: [{ role: 'user', content: 'client ' + n + ' round ' + r }] });
        const text = msg.content.map((c) => c.text).join('');
        if (text !== 'Hello world') throw new Error('client ' + n + ': answer "' + text + '"');
        summary.calls++;
        summary.usageTokens += msg.usage.input_tokens + msg.usage.output_tokens;

        const id = kind + '-' + n + '-' + r;
        const stream = await client.messages.create({ model: 'claude-mock', max_tokens: 64, stream: true,
            messages: [{ role: 'user', content: 'stream ' + id }] }, { headers: { 'x-mock': 'gated', 'x-mock-id': id } });
        let got = '';
        let input = 0;
        let output = 0;
        let stopped = false;
        for await (const ev of stream) {
            if (ev.type === 'message_start') input = ev.message.usage.input_tokens;
            if (ev.type === 'content_block_delta') {
                if (got === '') await openGate(id); // the first text is here while the rest is held
                got += ev.delta.text;
            }
            if (ev.type === 'message_delta') output = ev.usage.output_tokens;
            if (ev.type === 'message_stop') stopped = true;
        }
        if (got !== 'Hello world' || !stopped) throw new Error('stream ' + id + ': "' + got + '", stop ' + stopped);
        summary.streams++;
        summary.usageTokens += input + output;
    }
}

async function openaiClient(n) {
    const { default: OpenAI } = await import('openai');
    summary.sdk = 'openai ' + versionOf('openai');
    const client = new OpenAI({ baseURL: proxyUrl + '/v1', apiKey: KEY, maxRetries: 0, timeout: 120000 });
    for (let r = 0; r < rounds; r++) {
        const done = await client.chat.completions.create({ model: 'gpt-mock', max_completion_tokens: 64,
            messages: [{ role: 'user', content: 'client ' + n + ' round ' + r }] });
        const text = done.choices[0].message.content;
        if (text !== 'Hello world') throw new Error('client ' + n + ': answer "' + text + '"');
        summary.calls++;
        summary.usageTokens += done.usage.total_tokens;

        const id = kind + '-' + n + '-' + r;
        const stream = await client.chat.completions.create({ model: 'gpt-mock', max_completion_tokens: 64, stream: true,
            stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream ' + id }] },
        { headers: { 'x-mock': 'gated', 'x-mock-id': id } });
        let got = '';
        let total = -1;
        for await (const chunk of stream) {
            const piece = chunk.choices.length ? chunk.choices[0].delta.content || '' : '';
            if (piece) {
                if (got === '') await openGate(id);
                got += piece;
            }
            if (chunk.usage) total = chunk.usage.total_tokens;
        }
        if (got !== 'Hello world' || total < 0) throw new Error('stream ' + id + ': "' + got + '", usage ' + total);
        summary.streams++;
        summary.usageTokens += total;
    }
}

// One call; true when answered, false when the proxy refused it itself; throws otherwise.
async function ruledCall(model, call) {
    try {
        await call();
        return true;
    } catch (e) {
        const h = e && e.headers;
        const server = h ? (typeof h.get === 'function' ? h.get('server') : h.server) : '';
        if (e && e.status === 429 && server === 'tollgate-proxy') {
            summary.refusedByProxy[model] = (summary.refusedByProxy[model] || 0) + 1;
            return false;
        }
        throw e;
    }
}

async function openaiRulesClient(n) {
    const { default: OpenAI } = await import('openai');
    summary.sdk = 'openai ' + versionOf('openai');
    const client = new OpenAI({ baseURL: proxyUrl + '/v1', apiKey: KEY, maxRetries: 0, timeout: 120000 });
    const chat = n % 2 === 0;
    const model = chat ? 'gpt-mock-chat' : 'gpt-mock-resp';
    const answered = (text, usage, what) => {
        if (text !== 'Hello world' || !(usage > 0)) throw new Error(what + ' of client ' + n + ': "' + text + '", usage ' + usage);
        summary.usageTokens += usage;
        summary.answered[model] = (summary.answered[model] || 0) + 1;
    };
    for (let r = 0; r < rounds; r++) {
        const input = 'client ' + n + ' round ' + r;
        if (chat) {
            await ruledCall(model, async () => {
                const done = await client.chat.completions.create({ model, max_completion_tokens: 200,
                    messages: [{ role: 'user', content: input }] });
                answered(done.choices[0].message.content, done.usage.total_tokens, 'a call');
                summary.calls++;
            });
            await ruledCall(model, async () => {
                const stream = await client.chat.completions.create({ model, max_completion_tokens: 200, stream: true,
                    stream_options: { include_usage: true }, messages: [{ role: 'user', content: input }] });
                let got = '';
                let total = -1;
                for await (const chunk of stream) {
                    if (chunk.choices.length) got += chunk.choices[0].delta.content || '';
                    if (chunk.usage) total = chunk.usage.total_tokens;
                }
                answered(got, total, 'a stream');
                summary.streams++;
            });
        } else {
            await ruledCall(model, async () => {
                const resp = await client.responses.create({ model, max_output_tokens: 100, input });
                answered(resp.output_text, resp.usage.total_tokens, 'a response');
                summary.calls++;
            });
            await ruledCall(model, async () => {
                const stream = await client.responses.create({ model, max_output_tokens: 100, input, stream: true });
                let got = '';
                let total = -1;
                for await (const ev of stream) {
                    if (ev.type === 'response.output_text.delta') got += ev.delta;
                    if (ev.type === 'response.completed') total = ev.response.usage.total_tokens;
                }
                answered(got, total, 'a streamed response');
                summary.streams++;
            });
        }
    }
}

async function main() {
    if (kind === 'openai-rules') Object.assign(summary, { refusedByProxy: {}, answered: {} });
    const one = kind === 'anthropic' ? anthropicClient : kind === 'openai-rules' ? openaiRulesClient : openaiClient;
    const results = await Promise.allSettled(Array.from({ length: clients }, (_, n) => one(n)));
    for (const r of results) {
        // The first lines of each failure (the SDK's errors carry the proxy's answer).
        if (r.status === 'rejected') summary.failures.push(String(r.reason && r.reason.stack || r.reason).split('\n').slice(0, 3).join(' | '));
    }
    process.stdout.write(JSON.stringify(summary) + '\n');
    process.exit(summary.failures.length ? 1 : 0);
}

main().catch((e) => {
    summary.failures.push(String(e && e.stack || e));
    process.stdout.write(JSON.stringify(summary) + '\n');
    process.exit(1);
});
