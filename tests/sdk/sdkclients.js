// Real clients nobody here wrote: the official Anthropic or OpenAI Node SDK, pointed at
// `tollgate proxy` by its base URL, as an unmodified program would be. Run by tst_sdkclients.
//   node sdkclients.js anthropic|openai PROXY_URL MOCK_URL CLIENTS ROUNDS
// Starts CLIENTS clients at once; each makes ROUNDS plain and ROUNDS streamed calls. A
// streamed call asks the mock for a gated stream (it stops after its first text until this
// client, having received that text, opens the gate on the mock directly): a proxy that held
// the stream back would leave the gate shut. Prints one JSON summary; exits 1 on any failure.
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

async function main() {
    const one = kind === 'anthropic' ? anthropicClient : openaiClient;
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
