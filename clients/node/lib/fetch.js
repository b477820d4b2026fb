'use strict';
// tollgate.fetch(provider): a fetch for the official Anthropic and OpenAI SDKs that puts every
// request through the shared quota, as `tollgate proxy` does:
//
//   new Anthropic({ fetch: tollgate.fetch('anthropic') });  new OpenAI({ fetch: tollgate.fetch('openai') })
//
// Each request is estimated from its JSON body (model, prompt size, max_tokens) by the library
// (tollgate_call_new_http) and admitted before it is sent, holding a parallel slot until its
// answer has been read; the answer's status and headers go to the library as they arrive (its
// rate-limit headers are acted on at once), its body is passed to the SDK chunk by chunk while
// each chunk is also fed to the library (JSON or server-sent events: the real usage replaces
// the estimate), and the end of the body (or its abort) finishes the call. While there is no
// room the wrapper answers 429 itself with a Retry-After, as the proxy does, so the SDK's retry
// logic waits; an abort of the request's signal cancels the wait. The answer is asked for
// uncompressed (Accept-Encoding: identity) so that its usage can be read whatever the fetch.
const errors = require('./errors');

function refusal(error) {
    const headers = { 'content-type': 'application/json' };
    if (error.retryAfterMs !== null) {
        headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfterMs / 1000)));
        // Both SDKs prefer this one (to the millisecond) when it is there.
        headers['retry-after-ms'] = String(error.retryAfterMs);
    }
    const body = { type: 'error', error: { type: 'rate_limit_error', message: 'no room in the shared quota: ' + error.message } };
    return new Response(JSON.stringify(body), { status: 429, headers });
}

function abortError(signal) {
    return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

// The answer's body, passed through chunk by chunk; each chunk is fed to the call first. A
// failure of the metering never keeps a byte from the SDK (the call is finished as broken off).
function meteredBody(body, call) {
    const reader = body.getReader();
    let ended = false;
    const end = (brokenOff) => {
        if (ended) return;
        ended = true;
        try {
            call.answerFinish(brokenOff);
        } catch {
            // Already ended (a closed home): nothing more to do for the quota.
        } finally {
            call.free();
        }
    };
    return new ReadableStream({
        async pull(controller) {
            let r;
            try {
                r = await reader.read();
            } catch (e) {
                end(true);
                controller.error(e);
                return;
            }
            if (r.done) {
                end(false);
                controller.close();
                return;
            }
            if (!ended) {
                try {
                    call.answerBody(r.value);
                } catch {
                    end(true);
                }
            }
            controller.enqueue(r.value);
        },
        cancel(reason) {
            end(true);
            return reader.cancel(reason);
        },
    }, { highWaterMark: 0 });
}

function meteredFetch(openHome, provider, options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('tollgate: fetch options must be an object');
    const { caller = 'node-fetch', timeoutMs = 30000, home, fetch: inner = globalThis.fetch } = options;
    if (typeof provider !== 'string') throw new TypeError('tollgate: provider must be a string');
    if (provider === '') throw new errors.UsageError('tollgate: provider is empty');
    if (typeof inner !== 'function') throw new TypeError('tollgate: fetch must be a function');
    if (typeof timeoutMs !== 'number') throw new TypeError('tollgate: timeoutMs must be a number');
    if (Number.isNaN(timeoutMs) || timeoutMs < 0) throw new errors.UsageError(`tollgate: timeoutMs must be 0 or more (${timeoutMs})`);

    return async function tollgateFetch(input, init) {
        const request = new Request(input, init);
        const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined);
        const bytes = request.body ? new Uint8Array(await request.arrayBuffer()) : new Uint8Array(0);
        const headers = new Headers(request.headers);
        headers.set('accept-encoding', 'identity');

        const call = openHome(home).newHttpCall(provider, bytes, { caller });
        try {
            await call.admit({ timeoutMs, signal });
        } catch (e) {
            call.free();
            if (signal?.aborted) throw abortError(signal);
            if (e instanceof errors.Timeout || e instanceof errors.Refused) return refusal(e);
            throw e;
        }
        let response;
        try {
            const { body: _b, headers: _h, duplex: _d, ...rest } = init ?? {};
            response = await inner(request.url, {
                ...rest,
                method: request.method,
                headers,
                body: bytes.length || !['GET', 'HEAD'].includes(request.method) ? bytes : undefined,
                signal,
                redirect: request.redirect,
            });
            call.answerHeaders(response.status, [...response.headers]);
        } catch (e) {
            try {
                call.release();
            } catch {
                // Already ended (a closed home): the error that matters is the fetch's.
            } finally {
                call.free();
            }
            throw e;
        }
        if (!response.body) {
            try {
                call.answerFinish(false);
            } finally {
                call.free();
            }
            return response;
        }
        const metered = new Response(meteredBody(response.body, call), {
            status: response.status, statusText: response.statusText, headers: response.headers });
        Object.defineProperty(metered, 'url', { value: response.url });
        return metered;
    };
}

module.exports = { meteredFetch };
