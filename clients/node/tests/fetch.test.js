'use strict';
// tollgate.fetch under the official SDKs (tests/sdk: @anthropic-ai/sdk and openai, pinned by its
// package-lock.json) against the test mock provider (tests/helpers/mockprovider.js).
const test = require('node:test');
const assert = require('node:assert/strict');
const tollgate = require('..');
const { freshHome, startMock, sdk } = require('./support');

const anthropicModule = sdk('@anthropic-ai/sdk');
const openaiModule = sdk('openai');
const skip = !anthropicModule || !openaiModule ? 'TOLLGATE_SDK_MODULES names no tests/sdk/node_modules' : false;
const Anthropic = anthropicModule && (anthropicModule.default ?? anthropicModule);
const OpenAI = openaiModule && (openaiModule.default ?? openaiModule);
const KEY = 'sk-test-tollgate-key';
const ASK = { model: 'claude-mock', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] };

test('no request reaches the mock while it has no room', { skip }, async (t) => {
    // The mock allows 3 requests per 1.5 s; Tollgate is set to 3 per 2 s (the margin covers the
    // time between an admission and the request's arrival there) and 2 at once.
    const h = freshHome(t);
    const mock = await startMock(t, '--limit', '3', '--window-ms', '1500');
    h.cli('limits', 'set', 'anthropic', '--requests', '3', '--window', '2', '--parallel', '2');
    const client = new Anthropic({ baseURL: mock.url, apiKey: KEY, maxRetries: 0,
        fetch: tollgate.fetch('anthropic', { caller: 'node-fetch' }) });
    const answers = await Promise.all(Array.from({ length: 7 }, () => client.messages.create(ASK)));
    assert.deepEqual(answers.map((a) => a.content[0].text), Array(7).fill('Hello world'));
    const stats = await mock.stats();
    assert.equal(stats.refused, 0);
    assert.equal(stats.violations, 0);
    assert.ok(stats.requests >= 7);
    assert.ok(stats.maxConcurrent <= 2, String(stats.maxConcurrent));
    const p = h.provider('anthropic');
    assert.deepEqual(p.slots, []);
});

test('tokens settle to the usage the mock reported, plain and streamed, both SDKs', { skip }, async (t) => {
    const h = freshHome(t);
    const mock = await startMock(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '100', '--tokens', '1000000', '--window', '60');
    h.cli('limits', 'set', 'openai', '--requests', '100', '--tokens', '1000000', '--window', '60');
    const anthropic = new Anthropic({ baseURL: mock.url, apiKey: KEY, maxRetries: 0, fetch: tollgate.fetch('anthropic') });
    const plain = await anthropic.messages.create(ASK);
    let streamed = '';
    for await (const ev of await anthropic.messages.create({ ...ASK, stream: true })) {
        if (ev.type === 'content_block_delta') streamed += ev.delta.text;
    }
    assert.equal(streamed, 'Hello world'); // every byte of the SSE stream reached the SDK
    const anthropicTokens = (await mock.stats()).usageTokens;
    assert.ok(plain.usage.input_tokens > 0);
    assert.equal(h.provider('anthropic').used_tokens, anthropicTokens);

    const openai = new OpenAI({ baseURL: mock.url + '/v1', apiKey: KEY, maxRetries: 0, fetch: tollgate.fetch('openai') });
    const done = await openai.chat.completions.create({ model: 'gpt-mock', max_completion_tokens: 64,
        messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(done.choices[0].message.content, 'Hello world');
    let text = '';
    for await (const chunk of await openai.chat.completions.create({ model: 'gpt-mock', max_completion_tokens: 64,
        stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] })) {
        text += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(text, 'Hello world');
    const total = (await mock.stats()).usageTokens;
    assert.equal(h.provider('openai').used_tokens, total - anthropicTokens);
    assert.deepEqual(h.provider('openai').slots, []);
});

test('no room is answered 429 with a Retry-After; a 429 of the provider backs every caller off', { skip }, async (t) => {
    const h = freshHome(t);
    const mock = await startMock(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '1', '--window', '60');
    const client = new Anthropic({ baseURL: mock.url, apiKey: KEY, maxRetries: 0,
        fetch: tollgate.fetch('anthropic', { timeoutMs: 500 }) });
    await client.messages.create(ASK);
    await assert.rejects(client.messages.create(ASK), (e) => e.status === 429
        && Number(e.headers.get('retry-after')) >= 1 && Number(e.headers.get('retry-after-ms')) > 0
        && e.error.error.type === 'rate_limit_error');
    assert.equal((await mock.stats()).requests, 1);

    h.cli('limits', 'set', 'anthropic', '--requests', '100', '--window', '60');
    await assert.rejects(client.messages.create(ASK, { headers: { 'x-mock': '429' } }), (e) => e.status === 429);
    const p = h.provider('anthropic');
    assert.equal(p.consecutive_429s, 1);
    assert.deepEqual(p.slots, []);
});

test('an abort while waiting for room cancels the wait; one mid-stream finishes the call', { skip }, async (t) => {
    const h = freshHome(t);
    const mock = await startMock(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '100', '--window', '60', '--parallel', '1');
    const client = new Anthropic({ baseURL: mock.url, apiKey: KEY, maxRetries: 0, fetch: tollgate.fetch('anthropic') });
    const holder = await tollgate.call('anthropic');
    const controller = new AbortController();
    const pending = client.messages.create(ASK, { signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    await assert.rejects(pending, (e) => e.name === 'APIUserAbortError' || e.name === 'AbortError');
    holder.release();
    assert.equal((await mock.stats()).requests, 0);

    // A stream the client stops reading: the slot comes back (the call finished as broken off).
    const stream = await client.messages.create({ ...ASK, stream: true }, { headers: { 'x-mock': 'slow' } });
    for await (const ev of stream) {
        if (ev.type === 'message_start') break;
    }
    // (The SDK cancels the body as the loop breaks; the slot is back by then or soon after.)
    const after = await tollgate.call('anthropic', { timeoutMs: 5000 });
    after.release();
    assert.deepEqual(h.provider('anthropic').slots, []);
});

test('the answer\'s rate-limit headers are learned as the proxy learns them', { skip }, async (t) => {
    const h = freshHome(t);
    const mock = await startMock(t, '--limit', '50', '--window-ms', '60000', '--token-limit', '40000');
    h.cli('limits', 'set', 'anthropic', '--requests', '100', '--window', '60');
    const client = new Anthropic({ baseURL: mock.url, apiKey: KEY, maxRetries: 0, fetch: tollgate.fetch('anthropic') });
    await client.messages.create(ASK);
    const p = h.provider('anthropic');
    assert.equal(p.provider_reported.requests_per_minute, 50);
    assert.equal(p.provider_reported.tokens_per_minute, 40000);
    assert.equal(p.provider_remaining.requests, 49);
});
