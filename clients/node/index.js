'use strict';
// Tollgate in-process for Node: the shared quota of a Tollgate home (a directory or redis://)
// through libtollgate.so — the same core code as the `tollgate` CLI and `tollgate proxy`.
//
//   const tollgate = require('tollgate');
//   await using call = await tollgate.call('anthropic', { model, inputTokens: 1200, maxTokens: 800 });
//   const answer = await client.messages.create(...);
//   call.settle(answer.usage);
//
// tollgate.wrap(fn, options) admits each call of fn; tollgate.fetch(provider) is a fetch for the
// official SDKs (new Anthropic({ fetch: tollgate.fetch('anthropic') })). A wait for room runs
// off the event loop, on a thread of the addon's own, and an AbortSignal cancels it.
const native = require('./lib/native');
const errors = require('./lib/errors');

const { StateError, UsageError } = errors;
const DEFAULT_TIMEOUT_MS = 30000;
const MAX_TIMEOUT_MS = 365 * 24 * 3600 * 1000;

function typeName(v) {
    return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
}

function text(name, value, required = false) {
    if ((value === undefined || value === null) && !required) return null;
    if (typeof value !== 'string') throw new TypeError(`tollgate: ${name} must be a string, not ${typeName(value)}`);
    if (required && value === '') throw new UsageError(`tollgate: ${name} is empty`);
    return value;
}

function count(name, value, { allowUnknown = false, dflt } = {}) {
    if (value === undefined && dflt !== undefined) return dflt;
    if (typeof value !== 'number') throw new TypeError(`tollgate: ${name} must be a number, not ${typeName(value)}`);
    const low = allowUnknown ? -1 : 0;
    if (!Number.isSafeInteger(value) || value < low) {
        throw new UsageError(`tollgate: ${name} must be a whole number from ${low} up (${value})`);
    }
    return value;
}

function timeoutOf(value) {
    if (value === undefined) return DEFAULT_TIMEOUT_MS;
    if (typeof value !== 'number') throw new TypeError(`tollgate: timeoutMs must be a number, not ${typeName(value)}`);
    if (Number.isNaN(value) || value < 0) throw new UsageError(`tollgate: timeoutMs must be 0 or more (${value})`);
    return Math.floor(Math.min(value, MAX_TIMEOUT_MS));
}

function signalOf(value) {
    if (value === undefined || value === null) return null;
    if (typeof value !== 'object' || typeof value.aborted !== 'boolean' || typeof value.addEventListener !== 'function') {
        throw new TypeError(`tollgate: signal must be an AbortSignal, not ${typeName(value)}`);
    }
    return value;
}

function optionsOf(options) {
    if (options === undefined || options === null) return {};
    if (typeof options !== 'object') throw new TypeError(`tollgate: options must be an object, not ${typeName(options)}`);
    return options;
}

// (input, output) from a usage: undefined/null (not known: the estimate stands), or an object
// with Anthropic's (input_tokens, output_tokens, cache_creation_input_tokens), OpenAI's
// (prompt_tokens, completion_tokens) or camelCase (inputTokens, outputTokens) fields, or an
// answer that has such a `usage`.
function usageCounts(usage) {
    if (usage === undefined || usage === null) return [-1, -1];
    if (typeof usage !== 'object') throw new TypeError(`tollgate: a usage must be an object, not ${typeName(usage)}`);
    const has = (k) => usage[k] !== undefined && usage[k] !== null;
    if (!has('input_tokens') && !has('prompt_tokens') && !has('inputTokens') && usage.usage && typeof usage.usage === 'object') {
        return usageCounts(usage.usage);
    }
    const get = (k) => (has(k) ? count(k, usage[k]) : null);
    let input = get('input_tokens');
    let output = get('output_tokens');
    if (input === null && output === null) {
        input = get('prompt_tokens');
        output = get('completion_tokens');
    }
    if (input === null && output === null) {
        input = get('inputTokens');
        output = get('outputTokens');
    }
    if (input === null || output === null) {
        throw new TypeError('tollgate: a usage needs input_tokens and output_tokens (or prompt_tokens and '
            + 'completion_tokens, or inputTokens and outputTokens)');
    }
    return [input + (get('cache_creation_input_tokens') ?? 0), output];
}

// The Retry-After of an SDK's 429 error (its `headers`, a Headers or a plain object), in ms.
// A provider's Retry-After is told, not trusted: at most a day, as the proxy and the CLI cap
// it (an absurd value would otherwise throw in count() and hide the SDK's own error).
const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;

function retryAfterOf(error) {
    const h = error && error.headers;
    if (!h) return -1;
    const get = (k) => (typeof h.get === 'function' ? h.get(k) : h[k]);
    const cap = (ms) => Math.min(Math.floor(ms), MAX_RETRY_AFTER_MS);
    const msText = get('retry-after-ms');
    const ms = Number(msText);
    if (msText != null && String(msText).trim() !== '' && Number.isFinite(ms) && ms >= 0) return cap(ms);
    const text = get('retry-after');
    if (text == null || String(text).trim() === '') return -1;
    const s = Number(text);
    if (Number.isFinite(s)) return s >= 0 ? cap(s * 1000) : -1;
    if (/^[0-9]+$/.test(String(text).trim())) return MAX_RETRY_AFTER_MS; // digits past a double
    const at = Date.parse(String(text)); // an HTTP date
    return Number.isFinite(at) ? cap(Math.max(0, at - Date.now())) : -1;
}

function statusOf(error) {
    return error && typeof error === 'object' ? (error.status ?? error.statusCode) : undefined;
}

/** One call: admitted (tollgate.call), then ended by settle, report429 or release. */
class Call {
    #native;
    #home;
    #freed = false;

    /** @internal */
    constructor(nativeCall, home) {
        this.#native = nativeCall;
        this.#home = home; // keeps the Home alive as long as its calls
    }

    #live() {
        if (this.#freed) throw new StateError('tollgate: the call was freed', { code: 11, kind: 'state' });
        return this.#native;
    }

    get home() { return this.#home; }
    get fence() { return BigInt(this.#live().info().fence); }
    get holdsSlot() { return this.#live().info().holdsSlot; }
    get waitedMs() { return this.#live().info().waitedMs; }
    get tokens() { return this.#live().info().tokens; }

    /** Waits for room, `timeoutMs` at most (0: a try); `signal` cancels the wait. */
    async admit({ timeoutMs, signal } = {}) {
        const ms = timeoutOf(timeoutMs);
        const s = signalOf(signal);
        const n = this.#live();
        if (s && s.aborted) throw new errors.Cancelled('tollgate: aborted before admission',
            { code: 10, kind: 'cancelled', cause: s.reason });
        const onAbort = () => n.cancel();
        s?.addEventListener('abort', onAbort, { once: true });
        try {
            await n.admit(ms);
        } catch (e) {
            if (e instanceof errors.Cancelled && s?.aborted) e.cause = s.reason;
            throw e;
        } finally {
            s?.removeEventListener('abort', onAbort);
        }
        if (s?.aborted) {
            // Admitted as the signal fired: given back at once.
            n.release();
            throw new errors.Cancelled('tollgate: aborted at admission', { code: 10, kind: 'cancelled' });
        }
        return this;
    }

    /** Ends a wait in admit() (any time; nothing if it is not waiting). */
    cancel() {
        if (!this.#freed) this.#native.cancel();
    }

    /** The call succeeded: its real usage (see usageCounts; undefined: the estimate stands). */
    settle(usage) {
        const [input, output] = usageCounts(usage);
        this.#live().settle(input, output);
    }

    /** The provider answered 429: every caller backs off. `retryAfter`: ms, or the SDK's 429 error. */
    report429(retryAfter) {
        let ms = -1;
        if (retryAfter !== undefined && retryAfter !== null) {
            ms = typeof retryAfter === 'object' ? retryAfterOf(retryAfter) : count('retryAfterMs', retryAfter);
        }
        this.#live().report429(ms);
    }

    /** Given up before an answer: the slot back, the estimate stands. */
    release() {
        this.#live().release();
    }

    /** Frees the call (an admitted call not ended gives its slot back); later use is a StateError. */
    free() {
        if (this.#freed) return;
        this.#freed = true;
        this.#native.free();
    }

    // `using` / `await using`: a call not ended is released, then freed.
    [Symbol.dispose]() {
        if (this.#freed) return;
        try {
            if (this.#native.info().holdsSlot || this.#native.info().fence !== '0') this.#native.release();
        } catch (e) {
            if (!(e instanceof StateError)) throw e; // already ended
        } finally {
            this.free();
        }
    }

    async [Symbol.asyncDispose]() {
        this[Symbol.dispose]();
    }

    /** @internal the HTTP answer, as the proxy reads it (tollgate.fetch uses these). */
    answerHeaders(status, pairs) { this.#live().headers(status, pairs); }
    /** @internal */
    answerBody(chunk) { this.#live().body(chunk); }
    /** @internal */
    answerFinish(brokenOff) { this.#live().finish(brokenOff); }
}

/** An open Tollgate home: a directory or redis://... (undefined: $TOLLGATE_HOME, else the default). */
class Home {
    #native;

    constructor(where) {
        this.#native = new native.NativeHome(text('home', where));
    }

    get text() { return this.#native.text(); }

    /** The status as `tollgate status --json` gives it. */
    status() { return JSON.parse(this.#native.statusJson()); }

    /** Closes the home: later use is a ClosedError; its calls answer ClosedError and still give slots back. */
    close() { this.#native.close(); }

    /** A call stating its cost, not admitted yet (see tollgate.call). */
    newCall(provider, options) {
        const o = optionsOf(options);
        const slot = o.slot === undefined ? true : o.slot;
        if (typeof slot !== 'boolean') throw new TypeError(`tollgate: slot must be a boolean, not ${typeName(slot)}`);
        const n = new native.NativeCall(this.#native, text('provider', provider, true), text('caller', o.caller ?? 'node'),
            text('model', o.model), count('inputTokens', o.inputTokens, { dflt: 0 }),
            count('maxTokens', o.maxTokens, { dflt: 0 }), slot);
        return new Call(n, this);
    }

    /** A call estimated from an HTTP request's JSON body, as `tollgate proxy` estimates it. */
    newHttpCall(provider, body, options) {
        const o = optionsOf(options);
        if (!(body instanceof Uint8Array) && !(body instanceof ArrayBuffer)) {
            throw new TypeError(`tollgate: body must be a Uint8Array or an ArrayBuffer, not ${typeName(body)}`);
        }
        const n = new native.NativeCall(this.#native, text('provider', provider, true), text('caller', o.caller ?? 'node'), body);
        return new Call(n, this);
    }

    /** A call admitted: waits up to `timeoutMs` (default 30 s); `signal` cancels the wait. */
    async call(provider, options) {
        const o = optionsOf(options);
        timeoutOf(o.timeoutMs);
        signalOf(o.signal);
        const c = this.newCall(provider, o);
        try {
            return await c.admit({ timeoutMs: o.timeoutMs, signal: o.signal });
        } catch (e) {
            c.free();
            throw e;
        }
    }
}

const homes = new Map(); // home string (or the environment's) -> Home of this process

/** The Home of this process for `home` (undefined: $TOLLGATE_HOME, else the default), kept and shared. */
function openHome(home) {
    if (home instanceof Home) return home;
    text('home', home);
    // The environment is part of the key: a changed TOLLGATE_HOME names another home.
    const key = home !== undefined && home !== null ? 'home:' + home : 'env:' + (process.env.TOLLGATE_HOME ?? '');
    let h = homes.get(key);
    if (!h) {
        h = new Home(home ?? undefined);
        homes.set(key, h);
    }
    return h;
}

/** A call to `provider`, admitted (see index.d.ts for the options). */
async function call(provider, options) {
    const o = optionsOf(options);
    return openHome(o.home).call(provider, o);
}

/** The home's status, as `tollgate status --json` gives it. */
function status(home) {
    return openHome(home).status();
}

/** fn wrapped: each call of it is admitted first; its result's usage settles the call (else the
 * estimate stands); a throw releases it, or reports a 429 (an SDK's error with status 429). */
function wrap(fn, options) {
    if (typeof fn !== 'function') throw new TypeError(`tollgate: wrap needs a function, not ${typeName(fn)}`);
    const o = optionsOf(options);
    text('provider', o.provider, true);
    timeoutOf(o.timeoutMs);
    return async function wrapped(...args) {
        const c = await call(o.provider, o);
        try {
            let result;
            try {
                result = await fn.apply(this, args);
            } catch (e) {
                // The SDK's error is what the caller gets, whatever ending the call says.
                try {
                    if (statusOf(e) === 429) c.report429(e);
                    else c.release();
                } catch (ended) {
                    if (!(ended instanceof StateError)) {
                        try {
                            c.release();
                        } catch (ignored) {
                            // c.free() below gives the slot back if nothing else could
                        }
                    }
                }
                throw e;
            }
            let usage;
            try {
                usage = result && typeof result === 'object' ? usageCounts(result) : [-1, -1];
            } catch (e) {
                if (!(e instanceof TypeError)) throw e;
                usage = [-1, -1]; // a result without a usage: the estimate stands
            }
            c.settle(usage[0] < 0 ? undefined : { inputTokens: usage[0], outputTokens: usage[1] });
            return result;
        } finally {
            c.free();
        }
    };
}

module.exports = {
    call, wrap, status, openHome, Home, Call,
    fetch: (provider, options) => require('./lib/fetch').meteredFetch(openHome, provider, options),
    libraryVersion: () => native.version(),
    ...errors,
};
delete module.exports.fromStatus;
