// Agent-like clients of the official Anthropic SDK (tests/sdk/node_modules), for
// bench/sdkagents.sh: CLIENTS clients at once, each a loop of streamed calls until SECONDS
// have passed (then each finishes its call in flight and stops).
//   node bench/sdkagents.js PROXY_URL CLIENTS SECONDS MAX_TOKENS OUTPUT TOOL_TOKENS TURNS SYSTEM_TOKENS
// Each call: a system prompt of SYSTEM_TOKENS tokens (4 characters a token, as the mock counts)
// marked cache_control, then the task's conversation so far with its last block marked
// cache_control too (incremental caching, as agents do); max_tokens MAX_TOKENS, stream: true; the
// answer has OUTPUT tokens (asked of the mock by x-mock-output). After the answer the client adds
// it and a tool result of TOOL_TOKENS tokens, and calls again; after TURNS calls it starts a new
// task (a new conversation on the same system prompt). Each client names itself
// (X-Tollgate-Caller: agent-N), as separate agent processes would be told apart.
// Prints one JSON summary: calls, failures (after the SDK's own retries), the SDK's version.
'use strict';
const path = require('path');
const [proxyUrl, clientsArg, secondsArg, maxTokensArg, outputArg, toolArg, turnsArg, systemArg] = process.argv.slice(2);
const CLIENTS = Number(clientsArg || 8);
const SECONDS = Number(secondsArg || 60);
const MAX_TOKENS = Number(maxTokensArg || 2000);
const OUTPUT = Number(outputArg || 150);
const TOOL_TOKENS = Number(toolArg || 900);
const TURNS = Number(turnsArg || 6);
const SYSTEM_TOKENS = Number(systemArg || 19000);
const SDK = path.join(__dirname, '..', 'tests', 'sdk', 'node_modules', '@anthropic-ai', 'sdk');

// Text of n tokens (4 characters each) that no other client or turn repeats.
const textOf = (n, tag) => (tag + ' ').padEnd(n * 4, 'abcd efgh ijkl mnop ');

async function main() {
    const { default: Anthropic } = await import(path.join(SDK, 'index.js'));
    const version = require(path.join(SDK, 'package.json')).version;
    const system = [{ type: 'text', text: textOf(SYSTEM_TOKENS, 'You are a careful coding agent.'), cache_control: { type: 'ephemeral' } }];
    const deadline = Date.now() + SECONDS * 1000;
    const summary = { sdk: '@anthropic-ai/sdk ' + version, clients: CLIENTS, calls: 0, failures: 0, errors: [],
        usage: { input: 0, cacheRead: 0, cacheWrite: 0, output: 0 }, callMs: [] };
    async function client(n) {
        const anthropic = new Anthropic({ baseURL: proxyUrl, apiKey: 'x', timeout: 180000,
            defaultHeaders: { 'x-tollgate-caller': 'agent-' + n, 'x-mock-output': String(OUTPUT) } });
        let task = 0;
        while (Date.now() < deadline) {
            task++;
            const messages = [];
            for (let turn = 0; turn < TURNS && Date.now() < deadline; turn++) {
                const tag = 'client ' + n + ' task ' + task + ' turn ' + turn;
                messages.push({ role: 'user', content: [{ type: 'text', text: textOf(turn ? TOOL_TOKENS : 300, tag),
                    cache_control: { type: 'ephemeral' } }] });
                const started = Date.now();
                let answer = '';
                try {
                    const stream = await anthropic.messages.create({ model: 'claude-mock-agent', max_tokens: MAX_TOKENS,
                        system, messages, stream: true });
                    for await (const ev of stream) {
                        if (ev.type === 'message_start') {
                            const u = ev.message.usage;
                            summary.usage.input += u.input_tokens;
                            summary.usage.cacheRead += u.cache_read_input_tokens || 0;
                            summary.usage.cacheWrite += u.cache_creation_input_tokens || 0;
                        }
                        if (ev.type === 'content_block_delta') answer += ev.delta.text;
                        if (ev.type === 'message_delta') summary.usage.output += ev.usage.output_tokens;
                    }
                    summary.calls++;
                    summary.callMs.push(Date.now() - started);
                } catch (e) {
                    summary.failures++;
                    if (summary.errors.length < 5) summary.errors.push(String(e && e.message || e).slice(0, 300));
                    break; // a new task after a failure
                }
                // The earlier blocks keep their text; only the last one is marked (at most 4 breakpoints).
                for (const m of messages) for (const b of m.content) delete b.cache_control;
                messages.push({ role: 'assistant', content: [{ type: 'text', text: answer }] });
            }
        }
    }
    await Promise.all(Array.from({ length: CLIENTS }, (_, n) => client(n)));
    const ms = summary.callMs.sort((a, b) => a - b);
    summary.callMsP50 = ms.length ? ms[Math.floor(ms.length / 2)] : 0;
    summary.callMsMax = ms.length ? ms[ms.length - 1] : 0;
    delete summary.callMs;
    process.stdout.write(JSON.stringify(summary) + '\n');
}
main().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
