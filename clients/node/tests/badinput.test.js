'use strict';
// Bad input from JS is a typed error, never a crash: wrong types (TypeError), bad numbers
// (UsageError, a RangeError), a call used after its end or free, a home after close; the
// addon's own classes called with junk directly.
const test = require('node:test');
const assert = require('node:assert/strict');
const tollgate = require('..');
const native = require('../lib/native');
const { freshHome } = require('./support');

test('wrong types are TypeErrors and bad numbers UsageErrors (RangeErrors)', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--window', '60');
    const typeErrors = [
        () => tollgate.call(42), () => tollgate.call('anthropic', 'x'), () => tollgate.call('anthropic', { inputTokens: '5' }),
        () => tollgate.call('anthropic', { maxTokens: 5n }), () => tollgate.call('anthropic', { caller: {} }),
        () => tollgate.call('anthropic', { model: 7 }), () => tollgate.call('anthropic', { timeoutMs: '1' }),
        () => tollgate.call('anthropic', { signal: {} }), () => tollgate.call('anthropic', { slot: 1 }),
        () => tollgate.call('anthropic', { home: 3 }),
    ];
    for (const f of typeErrors) await assert.rejects(f(), TypeError, f.toString());
    const rangeErrors = [
        () => tollgate.call(''), () => tollgate.call('anthropic', { inputTokens: -1 }),
        () => tollgate.call('anthropic', { maxTokens: 1.5 }), () => tollgate.call('anthropic', { maxTokens: NaN }),
        () => tollgate.call('anthropic', { maxTokens: Infinity }), () => tollgate.call('anthropic', { maxTokens: 2 ** 60 }),
        () => tollgate.call('anthropic', { timeoutMs: -1 }), () => tollgate.call('nosuch'),
        () => tollgate.call('anthropic', { caller: 'a\0b' }),
    ];
    for (const f of rangeErrors) {
        await assert.rejects(f(), (e) => e instanceof RangeError && e instanceof tollgate.UsageError
            && e instanceof tollgate.TollgateError && e.kind === 'usage', f.toString());
    }
    assert.throws(() => tollgate.wrap('f', { provider: 'anthropic' }), TypeError);
    assert.throws(() => tollgate.fetch(1), TypeError);
    assert.throws(() => tollgate.fetch('anthropic', { timeoutMs: -5 }), RangeError);
    const call = await tollgate.call('anthropic');
    assert.throws(() => call.settle('many'), TypeError);
    assert.throws(() => call.settle({ input_tokens: -3, output_tokens: 1 }), RangeError);
    assert.throws(() => call.settle({ foo: 1 }), TypeError);
    assert.throws(() => call.report429(-2), RangeError);
    assert.throws(() => call.report429('soon'), TypeError);
    call.settle({ input_tokens: 1, output_tokens: 1 });
});

test('a call used after settle, release or free is a StateError', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--window', '60');
    const a = await tollgate.call('anthropic');
    a.settle();
    for (const f of [() => a.settle(), () => a.release(), () => a.report429()]) {
        assert.throws(f, (e) => e instanceof tollgate.StateError && e.kind === 'state');
    }
    await assert.rejects(a.admit(), tollgate.StateError);
    const b = await tollgate.call('anthropic');
    b.release();
    assert.throws(() => b.settle(), tollgate.StateError);
    b.free();
    b.free();
    assert.throws(() => b.release(), tollgate.StateError);
    assert.throws(() => b.fence, tollgate.StateError);
    b.cancel(); // harmless after free
});

test('a call waiting for admission refuses everything but cancel', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--window', '60', '--parallel', '1');
    const holder = await tollgate.call('anthropic');
    const waiting = tollgate.openHome().newCall('anthropic');
    const admitted = waiting.admit({ timeoutMs: 60000 });
    assert.throws(() => waiting.settle(), (e) => e instanceof tollgate.StateError && /waiting/.test(e.message));
    await assert.rejects(waiting.admit(), tollgate.StateError);
    waiting.free(); // cancels; freed when the wait ends
    await assert.rejects(admitted, tollgate.Cancelled);
    assert.throws(() => waiting.release(), tollgate.StateError);
    holder.release();
});

test('the addon called directly with junk throws, never crashes', async (t) => {
    const h = freshHome(t);
    h.cli('limits', 'set', 'anthropic', '--requests', '10', '--window', '60');
    const home = new native.NativeHome(h.home);
    const junk = [undefined, null, 1, -1, 1.5, NaN, 'x', {}, [], Symbol('s'), 10n, () => 1, new Uint8Array(2)];
    for (const j of junk) {
        assert.throws(() => new native.NativeHome(j === undefined || j === null || j === 'x' ? 7 : j), Error);
        assert.throws(() => new native.NativeCall(j, 'anthropic', null, null, 1, 1, true), Error);
        assert.throws(() => new native.NativeCall(home, 'anthropic', null, null, j === 1 ? -5 : j, 1, true), Error);
        if (!(j instanceof Uint8Array)) assert.throws(() => new native.NativeCall(home, 'anthropic', null, typeof j === 'string' ? 5 : j), Error);
        assert.throws(() => native.NativeHome.prototype.statusJson.call(j), TypeError);
        assert.throws(() => native.NativeCall.prototype.settle.call(j, 1, 1), TypeError);
        assert.throws(() => native.NativeCall.prototype.admit.call(home, 1), TypeError);
        assert.throws(() => native.setErrorFactory(typeof j === 'function' ? 5 : j), TypeError);
    }
    const call = new native.NativeCall(home, 'anthropic', null, null, 1, 1, true);
    await call.admit(1000);
    for (const j of [undefined, null, 'x', {}, [[1, 2]], [['a']], [[null, 'b']], -1, 1000]) {
        assert.throws(() => call.headers(j === 1000 ? 1000 : 200, typeof j === 'number' && j !== 1000 ? j : j), Error);
    }
    assert.throws(() => call.body('text'), TypeError);
    assert.throws(() => call.finish(1), TypeError);
    assert.throws(() => call.admit(-1), RangeError);
    call.settle(-1, -1);
    call.free();
    assert.throws(() => call.info(), tollgate.StateError);
    home.close();
    home.close();
    assert.throws(() => home.text(), tollgate.ClosedError);
});
