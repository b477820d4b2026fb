'use strict';
// tollgate.call, wrap, status and the ends of a call, on a directory home driven with the CLI.
const test = require('node:test');
const assert = require('node:assert/strict');
const tollgate = require('..');
const { freshHome } = require('./support');

test('a call is admitted, settled with its real usage, and status shows it', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--tokens', '100000', '--window', '60', '--parallel', '2');
    const call = await tollgate.call('anthropic', { caller: 'node-test', model: 'claude-x', inputTokens: 100, maxTokens: 50 });
    assert.equal(call.tokens, 150);
    assert.ok(call.fence > 0n);
    assert.equal(call.holdsSlot, true);
    assert.deepEqual(h.provider('anthropic').slots.length, 1);
    call.settle({ input_tokens: 7, output_tokens: 3, cache_creation_input_tokens: 2 });
    const p = h.provider('anthropic');
    assert.equal(p.used_tokens, 12);
    assert.deepEqual(p.slots, []);
    assert.equal(tollgate.status().providers[0].used_tokens, 12);
});

test('report429 backs every caller off; release gives the slot back with the estimate', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'openai', '--requests', '10', '--window', '60', '--parallel', '1');
    const a = await tollgate.call('openai', { inputTokens: 5, maxTokens: 5 });
    a.release();
    assert.deepEqual(h.provider('openai').slots, []);
    const b = await tollgate.call('openai');
    b.report429({ status: 429, headers: new Headers({ 'retry-after': '7' }) });
    const p = h.provider('openai');
    assert.equal(p.consecutive_429s, 1);
    assert.ok(p.backoff_remaining_ms > 5000, String(p.backoff_remaining_ms)); // at least the Retry-After's 7 s, less the time since
    await assert.rejects(tollgate.call('openai', { timeoutMs: 100 }), (e) => e instanceof tollgate.Refused
        && e instanceof tollgate.TollgateError && e.kind === 'refused' && e.retryAfterMs > 0);
});

test('asyncDispose releases a call not ended and frees it; wrap settles with the result', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--window', '60', '--parallel', '1');
    const call = await tollgate.call('anthropic', { maxTokens: 10 });
    await call[Symbol.asyncDispose]();
    assert.deepEqual(h.provider('anthropic').slots, []);
    assert.throws(() => call.settle(), tollgate.StateError);

    const ask = tollgate.wrap(async (n) => ({ usage: { prompt_tokens: n, completion_tokens: 1 } }),
        { provider: 'anthropic', maxTokens: 100 });
    assert.deepEqual(await ask(4), { usage: { prompt_tokens: 4, completion_tokens: 1 } });
    const failing = tollgate.wrap(async () => { throw Object.assign(new Error('rate'), { status: 429, headers: { 'retry-after': '2' } }); },
        { provider: 'anthropic' });
    await assert.rejects(failing(), /rate/);
    const p = h.provider('anthropic');
    assert.equal(p.consecutive_429s, 1);
    assert.deepEqual(p.slots, []);
    assert.equal(p.used_requests, 3);
    assert.equal(p.used_tokens, 10 + 5); // the disposed call's estimate, the wrapped one's usage, the 429's 0
});

test('a wait does not block the event loop, and an AbortSignal cancels it', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--window', '60', '--parallel', '1');
    const holder = await tollgate.call('anthropic');
    const controller = new AbortController();
    let ticks = 0;
    const timer = setInterval(() => { ticks++; if (ticks === 3) controller.abort(new Error('enough')); }, 20);
    await assert.rejects(tollgate.call('anthropic', { timeoutMs: 60000, signal: controller.signal }),
        (e) => e instanceof tollgate.Cancelled && e.cause.message === 'enough');
    clearInterval(timer);
    assert.ok(ticks >= 3);
    holder.release();
    // The slot is free: nothing of the cancelled wait was taken.
    const next = await tollgate.call('anthropic', { timeoutMs: 0 });
    next.settle();
});

test('waits for room leave libuv\'s pool free: file I/O and DNS go on while many wait', async (t) => {
    // More waiters than the pool's 4 threads: had they waited there, the file read and the
    // lookup below would queue behind them until the waits time out (and the waiters would
    // then have rejected with Timeout before the read, not been cancelled after it).
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '100', '--window', '60', '--parallel', '1');
    const holder = await tollgate.call('anthropic');
    const settled = [];
    const controller = new AbortController();
    const waiters = Array.from({ length: 8 }, (_, i) => tollgate.call('anthropic', { timeoutMs: 600000, signal: controller.signal })
        .then(() => settled.push(`admitted ${i}`), (e) => settled.push(e.name)));
    await require('fs').promises.readFile(__filename);
    await require('dns').promises.lookup('localhost');
    assert.deepEqual(settled, []);
    controller.abort();
    await Promise.all(waiters);
    assert.deepEqual(settled, Array(8).fill('Cancelled'));
    holder.release();
});

test('a call outlives its home: closed, it answers ClosedError and still gives its slot back', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--window', '60', '--parallel', '1');
    const home = new tollgate.Home(h.home);
    const call = await home.call('anthropic');
    home.close();
    assert.throws(() => call.settle(), (e) => e instanceof tollgate.ClosedError && e.kind === 'closed');
    assert.throws(() => home.status(), tollgate.ClosedError);
    assert.throws(() => home.newCall('anthropic'), tollgate.ClosedError);
    await assert.rejects(home.call('anthropic'), tollgate.ClosedError);
    call.free();
    assert.deepEqual(h.provider('anthropic').slots, []);
});

test('a Redis home: admitted, settled, a wait timed out, as on a directory', {
    skip: process.env.TOLLGATE_TEST_REDIS_URL ? false : 'TOLLGATE_TEST_REDIS_URL names no Redis server',
}, async (t) => {
    const h = freshHome(t);
    const url = `${process.env.TOLLGATE_TEST_REDIS_URL}?prefix=nodeclient${process.pid}x${Date.now()}`;
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--tokens', '1000', '--window', '60', '--parallel', '1',
        '--home', url);
    const home = new tollgate.Home(url);
    t.after(() => home.close());
    const call = await home.call('anthropic', { inputTokens: 100, maxTokens: 100 });
    await assert.rejects(home.call('anthropic', { timeoutMs: 300 }), tollgate.Timeout);
    call.settle({ input_tokens: 30, output_tokens: 20 });
    const p = home.status().providers.find((x) => x.provider === 'anthropic');
    assert.equal(p.used_tokens, 50);
    assert.deepEqual(p.slots, []);
    const next = await home.call('anthropic', { timeoutMs: 0 });
    next.release();
});

// A provider's Retry-After is told, not trusted: an absurd one is capped at a day (as the proxy
// caps it), one that is not a time is left out; either way the SDK's error reaches the caller,
// the 429 is reported for everyone and the slot comes back.
test('wrap reports a 429 with a hostile Retry-After and rethrows the SDK error', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '100', '--window', '60', '--parallel', '1');
    const day = 24 * 3600 * 1000;
    const cases = [
        ['99999999999999999999', day], ['1e300', day], ['9'.repeat(400), day],
        ['Fri, 31 Dec 9999 23:59:59 GMT', day], ['nan', null], ['-1', null], ['soon', null], ['', null],
    ];
    for (const [value, backoffAtMost] of cases) {
        h.cli('reset-backoff', 'anthropic');
        const sdkError = Object.assign(new Error('rate limited by the SDK'), { status: 429, headers: { 'retry-after': value } });
        const failing = tollgate.wrap(async () => { throw sdkError; }, { provider: 'anthropic' });
        await assert.rejects(failing(), (e) => e === sdkError, value.slice(0, 40));
        const p = h.provider('anthropic');
        assert.deepEqual(p.slots, [], value.slice(0, 40));
        assert.ok(p.consecutive_429s >= 1, value.slice(0, 40));
        assert.ok(p.backoff_remaining_ms > 0, value.slice(0, 40));
        if (backoffAtMost !== null) {
            assert.ok(p.backoff_remaining_ms > day / 2 && p.backoff_remaining_ms <= day + 10000,
                `${value.slice(0, 40)}: ${p.backoff_remaining_ms}`);
        }
    }
});
