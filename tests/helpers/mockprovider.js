// A loopback stand-in for a provider's API, for the proxy's tests (Node's own http module,
// no packages). It enforces its own quota and answers like Anthropic (/v1/messages) or OpenAI
// (/v1/chat/completions): rate-limit headers in each format, JSON or server-sent events with
// usage, and on request (header x-mock) a 429 with or without retry-after, a spend cap, a 529,
// a slow stream, a stream cut off in the middle, one that goes silent (hang), or a gated stream: it stops after its
// first text until POST /_release?id=<x-mock-id> (the client saw that text: nothing buffered it) or 10 s (then
// counted in gateTimeouts); or a JSON answer held whole until such a release (late), or whose headers go first and
// body after it (headers-first), or 20 s; or 20 interim 100 Continue and nothing more (continue-flood).
// Subscription plans (Anthropic's unified headers; the reset x-mock-reset-s seconds ahead, default
// 3): a 429 with unified status rejected (unified-rejected), a 429 whose message is "Claude AI usage
// limit reached|<epoch>" (subscription-429), an answer with status allowed_warning (unified-warning).
// x-mock-cache-read / x-mock-cache-write: Anthropic usage with that many cache reads / writes.
//   node mockprovider.js [--limit N --window-ms MS] [--delay-ms MS]
// Anthropic's own rules (bench/sdkagents.sh), on when --input-token-limit or --output-token-limit is
// given: /v1/messages without x-mock is admitted as Anthropic admits it (rules(), below).
//   node mockprovider.js --limit RPW --input-token-limit ITPW --output-token-limit OTPW --window-ms MS
//   node mockprovider.js --anthropic-rules --limit RPW --window-ms MS      (requests only)
// --no-ratelimit-headers: in either rules mode, no rate-limit headers; only the 429s' retry-after.
// GET /_rules: what that mode admitted (each admission's time and counted tokens) and refused.
// OpenAI's own rules (tst_sdkclients), on when an --openai-* limit is given: /v1/chat/completions
// and /v1/responses without x-mock are admitted as OpenAI admits them, per model (openaiRules, below).
//   node mockprovider.js --openai-rpm RPW --openai-tpm TPW --openai-rpd RPD --openai-tpd TPD
//       --window-ms MS [--day-ms MS] [--openai-models '{"gpt-x": {"rpd": 1000, "tpd": 600}}']
// GET /_openai: what that mode admitted and refused, per model.
// x-mock-answer-headers: a JSON object of headers added to the answer, whatever it is (a test's
// own rate-limit or plan headers: figures that change from one answer to the next, hostile ones).
// Prints its port on the first line of stdout. GET /_stats: what it saw — among it
// `violations`, requests that arrived while an answer it had sent said nothing was left
// (remaining 0 until a reset still ahead), and `usageTokens`, the usage it reported in all.
'use strict';
const http = require('http');
const https = require('https');
const fs = require('fs');
const crypto = require('crypto');

const args = process.argv.slice(2);
const opt = (name, dflt) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : dflt;
};
const LIMIT = opt('--limit', 1000000);
const WINDOW_MS = opt('--window-ms', 60000);
const DELAY_MS = opt('--delay-ms', 0);
const textOpt = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : '';
};
// --tls-cert FILE --tls-key FILE: serve HTTPS (the proxy's TLS upstream, verified against a test CA)
const TLS_CERT = textOpt('--tls-cert');
const TLS_KEY = textOpt('--tls-key');
const TOKEN_LIMIT = opt('--token-limit', 0); // > 0: answers also state a tokens-per-minute limit (not enforced)
// > 0: Anthropic's rules are enforced on /v1/messages (requests per window: --limit)
const INPUT_LIMIT = opt('--input-token-limit', 0);
const OUTPUT_LIMIT = opt('--output-token-limit', 0);
// --anthropic-rules: the same mode with requests only (--limit per --window-ms, no token budgets):
// bench/stormsdk.sh's provider that allows 10 requests a minute.
const RULES = INPUT_LIMIT > 0 || OUTPUT_LIMIT > 0 || args.includes('--anthropic-rules');
// --no-ratelimit-headers (with Anthropic's or OpenAI's rules): answers state no rate-limit
// headers; the provider says it is full only by its 429s (retry-after, and retry-after-ms for
// OpenAI), as providers that send no such headers do.
const NO_RATELIMIT_HEADERS = args.includes('--no-ratelimit-headers');
// > 0: OpenAI's rules are enforced on /v1/chat/completions and /v1/responses (openaiRules, below)
const OPENAI_RPW = opt('--openai-rpm', 0); // requests per window (--window-ms; OpenAI's is a minute)
const OPENAI_TPW = opt('--openai-tpm', 0); // tokens (input + output) per window
const OPENAI_RPD = opt('--openai-rpd', 0); // requests per day (--day-ms)
const OPENAI_TPD = opt('--openai-tpd', 0); // tokens per day
const DAY_MS = opt('--day-ms', 24 * 3600 * 1000);
const OPENAI_RULES = OPENAI_RPW > 0 || OPENAI_TPW > 0 || OPENAI_RPD > 0 || OPENAI_TPD > 0;
// --openai-models JSON: figures of some models of their own, {"gpt-x": {"rpd": 1000, "tpd": 600}}
// (rpm, tpm, rpd, tpd; what a model does not name is the default above).
const OPENAI_MODELS = JSON.parse(textOpt('--openai-models') || '{}');

const stats = { requests: 0, refused: 0, concurrent: 0, maxConcurrent: 0, outputTokens: 0, callers: {}, aborted: 0,
    acceptEncoding: [], violations: 0, usageTokens: 0, gateTimeouts: 0, keys: {}, connections: 0, dropped: 0,
    // How long each of the last STREAM_TIMES streams took here, from its head to its end (ms), and how many
    // streams ended in all: bench/proxylatency.sh tells the proxy's delay from this server's own.
    streams: 0, streamMs: [],
    // Request bodies as they arrive: bytes received in all, and requests whose connection closed
    // before their body was complete (a proxy that cut a request off mid-body).
    bodyBytes: 0, incompleteBodies: 0, uploads: [], tokenLeaks: 0, paths: [] };
const STREAM_TIMES = 20000;
let dropNext = false; // POST /_dropnext: the next request on a kept connection is dropped unanswered
// Times of admitted requests, oldest first; those before `admittedFrom` have left the window.
// (Dropped from the front as they expire: a filter of the whole window per request made this
// server slower the longer it ran — at thousands of requests a second, milliseconds a request.)
let admitted = [];
let admittedFrom = 0;
let exhaustedUntil = 0; // the latest reset of an answer that said remaining 0
const gates = new Map(); // x-mock-id -> opens a gated stream

function quota(now) {
    while (admittedFrom < admitted.length && admitted[admittedFrom] <= now - WINDOW_MS) admittedFrom++;
    if (admittedFrom > 1024 && admittedFrom * 2 > admitted.length) {
        admitted = admitted.slice(admittedFrom);
        admittedFrom = 0;
    }
    const count = admitted.length - admittedFrom;
    const resetMs = count ? admitted[admittedFrom] + WINDOW_MS : now;
    return { remaining: Math.max(0, LIMIT - count), resetMs };
}

function headersFor(kind, now) {
    const q = quota(now);
    if (kind === 'anthropic') {
        const h = {
            'anthropic-ratelimit-requests-limit': String(LIMIT),
            'anthropic-ratelimit-requests-remaining': String(q.remaining),
            'anthropic-ratelimit-requests-reset': new Date(q.resetMs).toISOString(),
        };
        if (TOKEN_LIMIT > 0) {
            h['anthropic-ratelimit-tokens-limit'] = String(TOKEN_LIMIT);
            h['anthropic-ratelimit-tokens-remaining'] = String(TOKEN_LIMIT);
            h['anthropic-ratelimit-tokens-reset'] = new Date(now + 60000).toISOString();
        }
        return h;
    }
    const h = {
        'x-ratelimit-limit-requests': String(LIMIT),
        'x-ratelimit-remaining-requests': String(q.remaining),
        'x-ratelimit-reset-requests': Math.max(0, q.resetMs - now) + 'ms',
    };
    if (TOKEN_LIMIT > 0) {
        h['x-ratelimit-limit-tokens'] = String(TOKEN_LIMIT);
        h['x-ratelimit-remaining-tokens'] = String(TOKEN_LIMIT);
        h['x-ratelimit-reset-tokens'] = '60s';
    }
    return h;
}

// Every answer with rate-limit headers goes through here as it is sent: when it says nothing
// is left, until when (OpenAI's reset is relative: from now, the earliest a reader can count).
function sent(headers) {
    if (headers['anthropic-ratelimit-requests-remaining'] === '0')
        exhaustedUntil = Math.max(exhaustedUntil, Date.parse(headers['anthropic-ratelimit-requests-reset']));
    if (headers['x-ratelimit-remaining-requests'] === '0')
        exhaustedUntil = Math.max(exhaustedUntil, Date.now() + parseInt(headers['x-ratelimit-reset-requests'], 10));
    return headers;
}

// Anthropic's usage of an answer: 11 uncached input tokens, and cache reads and writes when the
// request asks for them (x-mock-cache-read, x-mock-cache-write).
function anthropicUsage(req, output) {
    const usage = { input_tokens: 11, output_tokens: output };
    const read = Number(req.headers['x-mock-cache-read'] || 0);
    const write = Number(req.headers['x-mock-cache-write'] || 0);
    if (read || write) Object.assign(usage, { cache_creation_input_tokens: write, cache_read_input_tokens: read });
    return usage;
}

// The subscription plan's headers (status allowed | allowed_warning | rejected) with a reset
// `seconds` ahead (epoch seconds, as the plans send it).
function unifiedHeaders(status, resetEpoch) {
    return {
        'anthropic-ratelimit-unified-status': status,
        'anthropic-ratelimit-unified-reset': String(resetEpoch),
        'anthropic-ratelimit-unified-representative-claim': 'five_hour',
        'anthropic-ratelimit-unified-5h-utilization': status === 'rejected' ? '1.0' : '0.92',
        'anthropic-ratelimit-unified-5h-reset': String(resetEpoch),
        'anthropic-ratelimit-unified-7d-utilization': '0.4',
    };
}

function error(res, status, headers, type, message) {
    res.writeHead(status, Object.assign({ 'content-type': 'application/json' }, headers));
    res.end(JSON.stringify({ type: 'error', error: { type, message } }));
}

// Anthropic's own rules (RULES): per window W (--window-ms; Anthropic's is a minute) at most
// --limit requests, --input-token-limit input tokens and --output-token-limit output tokens, where
//  - input counts input_tokens + cache_creation_input_tokens; cache reads are free;
//  - output is reserved at max_tokens when the request starts and corrected to the real output
//    at its end;
//  - the prompt cache works by breakpoints: the prompt (system blocks, then the messages' blocks)
//    up to each block marked cache_control is cached; the longest prefix already cached (ending at
//    any block, as Anthropic looks back from a breakpoint) is read, the rest up to the last
//    breakpoint is written (cached from the request's start, 5 minutes),
//    what follows it is uncached input; tokens are ceil(characters / 4) of each block's text.
// A request that would pass any budget gets a 429 with retry-after (when its room comes);
// every answer carries anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-*,
// the limits stated per minute as Anthropic's are. The answer is streamed (SSE): message_start
// with the usage, text deltas (x-mock-output tokens in all, default 150, in 8 pieces DELAY_MS
// apart, at least 25 ms), message_delta with the real output. Non-streamed requests get JSON.
const rules = (() => {
    const CACHE_TTL_MS = 5 * 60 * 1000;
    const cache = new Map(); // prefix hash -> expiry
    const events = []; // every admission: { t, input, output (reserved, then real), done, ... }
    let from = 0; // events before it have left the window
    const r = { admitted: 0, refused: 0, refusedBy: { requests: 0, input: 0, output: 0 },
        aborted: 0, cacheRead: 0, cacheWrite: 0, uncached: 0 };
    const tokensOf = (text) => Math.ceil(String(text || '').length / 4);
    const textOf = (c) => (typeof c === 'string' ? c : (c.text !== undefined ? c.text
        : (c.content !== undefined ? (typeof c.content === 'string' ? c.content : c.content.map(textOf).join('')) : '')));
    // The prompt's blocks in order, each { text, mark } (mark: cache_control on it).
    function blocksOf(body) {
        const out = [];
        const sys = body.system;
        if (typeof sys === 'string') out.push({ text: sys, mark: false });
        else if (Array.isArray(sys)) for (const b of sys) out.push({ text: textOf(b), mark: !!b.cache_control });
        for (const m of body.messages || []) {
            if (typeof m.content === 'string') out.push({ text: m.role + ':' + m.content, mark: false });
            else for (const b of m.content || []) out.push({ text: m.role + ':' + textOf(b), mark: !!b.cache_control });
        }
        return out;
    }
    function usageOf(body, now) {
        const blocks = blocksOf(body);
        let total = 0;
        const h = crypto.createHash('sha256');
        const marks = []; // { key, tokens } at each breakpoint
        const hits = []; // tokens of every prefix (at any block's end) that is cached
        for (const b of blocks) {
            h.update(String(b.text.length) + ':' + b.text);
            total += tokensOf(b.text);
            const key = h.copy().digest('hex');
            if (b.mark) marks.push({ key, tokens: total });
            if ((cache.get(key) || 0) > now) hits.push(total);
        }
        const last = marks.length ? marks[marks.length - 1].tokens : 0;
        let read = 0;
        for (const t of hits) if (t <= last) read = Math.max(read, t);
        return { read, write: last - read, uncached: total - last + 4 * (body.messages || []).length, marks };
    }
    function used(now) {
        while (from < events.length && events[from].t <= now - WINDOW_MS) from++;
        const u = { requests: 0, input: 0, output: 0 };
        for (let i = from; i < events.length; i++) { u.requests++; u.input += events[i].input; u.output += events[i].output; }
        return u;
    }
    // When `need` more of a metric fits (events leave the window oldest first), ms from now.
    function roomIn(now, metric, limit, need) {
        let u = used(now)[metric];
        for (let i = from; i < events.length && u + need > limit; i++) {
            u -= metric === 'requests' ? 1 : events[i][metric];
            if (u + need <= limit) return events[i].t + WINDOW_MS - now;
        }
        return 0;
    }
    function headers(now) {
        if (NO_RATELIMIT_HEADERS) return {};
        const u = used(now);
        const perMinute = (n) => String(Math.round(n * 60000 / WINDOW_MS));
        const reset = new Date(events.length > from ? events[from].t + WINDOW_MS : now).toISOString();
        const h = {};
        const put = (name, limit, n) => {
            h['anthropic-ratelimit-' + name + '-limit'] = perMinute(limit);
            h['anthropic-ratelimit-' + name + '-remaining'] = perMinute(Math.max(0, limit - n));
            h['anthropic-ratelimit-' + name + '-reset'] = reset;
        };
        put('requests', LIMIT, u.requests);
        if (INPUT_LIMIT > 0) put('input-tokens', INPUT_LIMIT, u.input);
        if (OUTPUT_LIMIT > 0) put('output-tokens', OUTPUT_LIMIT, u.output);
        if (INPUT_LIMIT > 0 && OUTPUT_LIMIT > 0) put('tokens', INPUT_LIMIT + OUTPUT_LIMIT, u.input + u.output);
        // An answer that says a budget is used up: a request arriving before its reset is a violation.
        for (const name of ['requests', 'input-tokens', 'output-tokens', 'tokens'])
            if (h['anthropic-ratelimit-' + name + '-remaining'] === '0') exhaustedUntil = Math.max(exhaustedUntil, Date.parse(reset));
        return h;
    }
    function serve(req, res, body, now) {
        const use = usageOf(body, now);
        const input = use.uncached + use.write;
        const reserve = Math.max(1, Number(body.max_tokens) || 4096);
        const u = used(now);
        const over = [];
        if (u.requests + 1 > LIMIT) over.push(['requests', roomIn(now, 'requests', LIMIT, 1)]);
        if (INPUT_LIMIT > 0 && u.input + input > INPUT_LIMIT) over.push(['input', roomIn(now, 'input', INPUT_LIMIT, input)]);
        if (OUTPUT_LIMIT > 0 && u.output + reserve > OUTPUT_LIMIT) over.push(['output', roomIn(now, 'output', OUTPUT_LIMIT, reserve)]);
        if (over.length) {
            r.refused++;
            stats.refused++;
            for (const [m] of over) r.refusedBy[m]++;
            const wait = Math.max(...over.map((o) => o[1]));
            return error(res, 429, Object.assign({ 'retry-after': String(Math.max(1, Math.ceil(wait / 1000))) }, headers(now)),
                'rate_limit_error', 'This request would exceed the rate limit for your organization of ' + over.map((o) => o[0]).join(', ') + ' (mock)');
        }
        for (const m of use.marks) cache.set(m.key, now + CACHE_TTL_MS);
        const ev = { t: now, input, output: reserve, reserved: reserve, done: 0, cacheRead: use.read };
        events.push(ev);
        r.admitted++;
        r.cacheRead += use.read;
        r.cacheWrite += use.write;
        r.uncached += use.uncached;
        const real = Math.min(reserve, Math.max(1, Number(req.headers['x-mock-output'] || 150)));
        const usage = { input_tokens: use.uncached, cache_creation_input_tokens: use.write, cache_read_input_tokens: use.read, output_tokens: 1 };
        const h = headers(now);
        stats.concurrent++;
        stats.maxConcurrent = Math.max(stats.maxConcurrent, stats.concurrent);
        let finished = false;
        const finish = (ok) => {
            if (finished) return;
            finished = true;
            stats.concurrent--;
            ev.done = Date.now();
            if (ok) { ev.output = real; stats.outputTokens += real; stats.usageTokens += input + real; stats.streams++; } else r.aborted++;
        };
        res.on('close', () => finish(false)); // the client left: the reservation stands
        const text = (n) => 'x'.repeat(n * 4);
        if (!body.stream) {
            setTimeout(() => {
                res.writeHead(200, Object.assign({ 'content-type': 'application/json' }, h));
                res.end(JSON.stringify({ id: 'msg_mock', type: 'message', role: 'assistant', model: body.model,
                    content: [{ type: 'text', text: text(real) }], stop_reason: 'end_turn', usage: Object.assign(usage, { output_tokens: real }) }));
                finish(true);
            }, DELAY_MS);
            return;
        }
        res.writeHead(200, Object.assign({ 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }, h));
        const out = [{ type: 'message_start', message: { id: 'msg_mock', type: 'message', role: 'assistant', model: body.model,
            content: [], stop_reason: null, usage } },
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }];
        const PIECES = 8;
        for (let i = 0; i < PIECES; i++) {
            const n = Math.floor(real * (i + 1) / PIECES) - Math.floor(real * i / PIECES);
            out.push({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: text(n) } });
        }
        out.push({ type: 'content_block_stop', index: 0 });
        out.push({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: real } });
        out.push({ type: 'message_stop' });
        const gap = Math.max(25, DELAY_MS);
        let i = 0;
        const next = () => {
            if (finished) return;
            if (i < out.length) {
                const e = out[i++];
                res.write('event: ' + e.type + '\ndata: ' + JSON.stringify(e) + '\n\n');
                setTimeout(next, i >= 2 && i < 2 + PIECES ? gap : 0);
                return;
            }
            res.end();
            finish(true);
        };
        next();
    }
    // GET /_rules: the counters, the limits, and every admission (time, counted input, output).
    function report() {
        return Object.assign({ windowMs: WINDOW_MS, limits: { requests: LIMIT, input: INPUT_LIMIT, output: OUTPUT_LIMIT } }, r,
            { events: events.map((e) => ({ t: e.t, input: e.input, output: e.output, reserved: e.reserved, done: e.done, cacheRead: e.cacheRead })) });
    }
    return { serve, report };
})();

// OpenAI's own rules (OPENAI_RULES), per model — each model has budgets of its own, with the same
// figures unless --openai-models gives it others: per window W (--window-ms; OpenAI's is a minute) at most --openai-rpm requests and
// --openai-tpm tokens, per day (--day-ms, default 24 h) at most --openai-rpd requests and
// --openai-tpd tokens, where
//  - tokens = input + output; input is the whole prompt, cached or not (OpenAI: caching does not
//    lower the rate limit), ceil(characters / 4) of the text of the messages (Chat Completions)
//    or of input and instructions (Responses);
//  - output is reserved at max_completion_tokens / max_tokens / max_output_tokens (4096 when
//    none) when the request arrives, and corrected to the real output (x-mock-output, default
//    20, at most the reservation) when its answer ends;
//  - the windows roll: a request counts from its arrival until W (or the day) after it.
// A request that would pass any budget gets OpenAI's 429 (rate_limit_exceeded, retry-after-ms
// and retry-after: when its room comes) and is counted in noRoom: a client that waits as it
// should never meets one. Every answer carries x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// of the model's window budgets, stated per minute as OpenAI's are (reset: a duration such as
// "850ms"; OpenAI documents no per-day headers, so none are sent). Answers: Chat Completions
// (JSON, or a stream whose last chunk carries the usage when stream_options.include_usage) and
// Responses (JSON, or a stream: response.created, output_text deltas, response.completed with
// the usage); the text is "Hello world", in 4 pieces 25 ms apart when streamed.
const openaiRules = (() => {
    const models = new Map(); // model -> { events: [{ t, tokens, reserved, done }], violations state }
    const r = { admitted: 0, noRoom: 0, refusedBy: { requests: 0, tokens: 0, requestsPerDay: 0, tokensPerDay: 0 },
        violations: 0, aborted: 0, chat: 0, responses: 0, streams: 0, usageTokens: 0, models: {} };
    const tokensOf = (text) => Math.ceil(String(text || '').length / 4);
    const textOf = (c) => (c === undefined || c === null ? '' : typeof c === 'string' ? c
        : Array.isArray(c) ? c.map(textOf).join('') : c.text !== undefined ? String(c.text)
            : c.content !== undefined ? textOf(c.content) : '');
    function inputOf(body, responses) {
        if (responses) return tokensOf(textOf(body.instructions)) + tokensOf(textOf(body.input));
        return (body.messages || []).reduce((n, m) => n + tokensOf(textOf(m.content)), 0);
    }
    function model(name) {
        if (!models.has(name)) {
            const own = OPENAI_MODELS[name] || {};
            const pick = (k, d) => (own[k] !== undefined ? Number(own[k]) : d);
            models.set(name, { events: [], exhaustedUntil: 0, limits: { rpw: pick('rpm', OPENAI_RPW),
                tpw: pick('tpm', OPENAI_TPW), rpd: pick('rpd', OPENAI_RPD), tpd: pick('tpd', OPENAI_TPD) } });
            r.models[name] = { admitted: 0, noRoom: 0, tokens: 0, violations: 0, limits: models.get(name).limits };
        }
        return models.get(name);
    }
    // What is used of each budget at `now` (events that have left the day are dropped).
    function used(m, now) {
        m.events = m.events.filter((e) => e.t > now - Math.max(WINDOW_MS, DAY_MS));
        const u = { requests: 0, tokens: 0, requestsPerDay: 0, tokensPerDay: 0 };
        for (const e of m.events) {
            if (e.t > now - WINDOW_MS) { u.requests++; u.tokens += e.tokens; }
            if (e.t > now - DAY_MS) { u.requestsPerDay++; u.tokensPerDay += e.tokens; }
        }
        return u;
    }
    // In how many ms `need` more of a budget fits (events leave oldest first); 0: now.
    function roomIn(m, now, span, perRequest, limit, need) {
        const inside = m.events.filter((e) => e.t > now - span);
        let u = inside.reduce((a, e) => a + (perRequest ? 1 : e.tokens), 0);
        for (const e of inside) {
            if (u + need <= limit) break;
            u -= perRequest ? 1 : e.tokens;
            if (u + need <= limit) return e.t + span - now;
        }
        return 0;
    }
    function headers(m, now) {
        if (NO_RATELIMIT_HEADERS) return {};
        const u = used(m, now);
        const perMinute = (n) => String(Math.round(n * 60000 / WINDOW_MS));
        const inWindow = m.events.filter((e) => e.t > now - WINDOW_MS);
        const reset = (inWindow.length ? inWindow[0].t + WINDOW_MS - now : 0) + 'ms';
        const h = {};
        const put = (name, limit, n) => {
            h['x-ratelimit-limit-' + name] = perMinute(limit);
            h['x-ratelimit-remaining-' + name] = perMinute(Math.max(0, limit - n));
            h['x-ratelimit-reset-' + name] = reset;
            // A client reading this answer knows the budget is spent until its reset.
            if (limit - n <= 0) m.exhaustedUntil = Math.max(m.exhaustedUntil, now + parseInt(reset, 10));
        };
        if (m.limits.rpw > 0) put('requests', m.limits.rpw, u.requests);
        if (m.limits.tpw > 0) put('tokens', m.limits.tpw, u.tokens);
        return h;
    }
    function serve(req, res, body, now, responses) {
        const name = String(body.model || '');
        const m = model(name);
        if (now < m.exhaustedUntil) { r.violations++; r.models[name].violations++; }
        const input = inputOf(body, responses);
        const bound = Number(responses ? body.max_output_tokens : (body.max_completion_tokens || body.max_tokens));
        const reserve = Math.max(1, Math.ceil(bound) || 4096);
        const u = used(m, now);
        const over = [];
        const { rpw, tpw, rpd, tpd } = m.limits;
        if (rpw > 0 && u.requests + 1 > rpw) over.push(['requests', roomIn(m, now, WINDOW_MS, true, rpw, 1)]);
        if (tpw > 0 && u.tokens + input + reserve > tpw)
            over.push(['tokens', roomIn(m, now, WINDOW_MS, false, tpw, input + reserve)]);
        if (rpd > 0 && u.requestsPerDay + 1 > rpd) over.push(['requestsPerDay', roomIn(m, now, DAY_MS, true, rpd, 1)]);
        if (tpd > 0 && u.tokensPerDay + input + reserve > tpd)
            over.push(['tokensPerDay', roomIn(m, now, DAY_MS, false, tpd, input + reserve)]);
        if (over.length) {
            r.noRoom++;
            r.models[name].noRoom++;
            stats.refused++;
            for (const [b] of over) r.refusedBy[b]++;
            const wait = Math.max(1, ...over.map((o) => o[1]));
            res.writeHead(429, Object.assign({ 'content-type': 'application/json', 'retry-after-ms': String(wait),
                'retry-after': String(Math.ceil(wait / 1000)) }, headers(m, now)));
            res.end(JSON.stringify({ error: { message: 'Rate limit reached for ' + name + ' on ' + over.map((o) => o[0]).join(', ')
                + ' (mock)', type: 'requests', param: null, code: 'rate_limit_exceeded' } }));
            return;
        }
        const ev = { t: now, tokens: input + reserve, reserved: reserve, done: 0 };
        m.events.push(ev);
        r.admitted++;
        r.models[name].admitted++;
        if (responses) r.responses++; else r.chat++;
        const real = Math.min(reserve, Math.max(1, Number(req.headers['x-mock-output'] || 20)));
        const h = headers(m, now);
        stats.concurrent++;
        stats.maxConcurrent = Math.max(stats.maxConcurrent, stats.concurrent);
        let finished = false;
        const finish = (ok) => {
            if (finished) return;
            finished = true;
            stats.concurrent--;
            ev.done = Date.now();
            if (!ok) { r.aborted++; return; } // the client left: the reservation stands
            ev.tokens = input + real; // corrected to the real output
            r.usageTokens += input + real;
            r.models[name].tokens += input + real;
            stats.usageTokens += input + real;
            stats.outputTokens += real;
        };
        res.on('close', () => finish(false));
        const pieces = ['Hel', 'lo ', 'wor', 'ld'];
        const id = (responses ? 'resp_' : 'chatcmpl-') + crypto.randomBytes(6).toString('hex');
        const created = Math.floor(now / 1000);
        const chatUsage = { prompt_tokens: input, completion_tokens: real, total_tokens: input + real,
            prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } };
        const response = (status, withOutput) => ({ id, object: 'response', created_at: created, status, model: name,
            output: withOutput ? [{ type: 'message', id: 'msg_' + id, status: 'completed', role: 'assistant',
                content: [{ type: 'output_text', text: pieces.join(''), annotations: [] }] }] : [],
            usage: withOutput ? { input_tokens: input, input_tokens_details: { cached_tokens: 0 }, output_tokens: real,
                output_tokens_details: { reasoning_tokens: 0 }, total_tokens: input + real } : null });
        if (!body.stream) {
            res.writeHead(200, Object.assign({ 'content-type': 'application/json' }, h));
            res.end(JSON.stringify(responses ? response('completed', true)
                : { id, object: 'chat.completion', created, model: name, choices: [{ index: 0,
                    message: { role: 'assistant', content: pieces.join('') }, finish_reason: 'stop' }], usage: chatUsage }));
            finish(true);
            return;
        }
        r.streams++;
        res.writeHead(200, Object.assign({ 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }, h));
        const out = [];
        if (responses) {
            let seq = 0;
            const ev2 = (type, rest) => ({ event: type, data: Object.assign({ type, sequence_number: seq++ }, rest) });
            out.push(ev2('response.created', { response: response('in_progress', false) }));
            for (const p of pieces) out.push(ev2('response.output_text.delta', { item_id: 'msg_' + id, output_index: 0, content_index: 0, delta: p }));
            out.push(ev2('response.completed', { response: response('completed', true) }));
        } else {
            const chunk = (choices, usage) => ({ data: { id, object: 'chat.completion.chunk', created, model: name, choices, usage } });
            for (const p of pieces) out.push(chunk([{ index: 0, delta: { content: p }, finish_reason: null }], null));
            out.push(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }], null));
            if (body.stream_options && body.stream_options.include_usage) out.push(chunk([], chatUsage));
        }
        let i = 0;
        const next = () => {
            if (finished) return;
            if (i < out.length) {
                const e = out[i++];
                res.write((e.event ? 'event: ' + e.event + '\n' : '') + 'data: ' + JSON.stringify(e.data) + '\n\n');
                setTimeout(next, 25);
                return;
            }
            if (!responses) res.write('data: [DONE]\n\n');
            res.end();
            finish(true);
        };
        next();
    }
    function report() {
        return Object.assign({ windowMs: WINDOW_MS, dayMs: DAY_MS,
            limits: { requests: OPENAI_RPW, tokens: OPENAI_TPW, requestsPerDay: OPENAI_RPD, tokensPerDay: OPENAI_TPD } }, r);
    }
    return { serve, report };
})();

const handler = (req, res) => {
    if (req.method === 'POST' && req.url === '/_dropnext') {
        dropNext = true;
        res.writeHead(200, { connection: 'close' });
        res.end();
        return;
    }
    if (!req.url.startsWith('/_')) {
        // As a server closes a kept connection that it timed out just as a request arrived.
        if (dropNext && req.socket.tgServed > 0) {
            dropNext = false;
            stats.dropped++;
            req.socket.destroy();
            return;
        }
        req.socket.tgServed = (req.socket.tgServed || 0) + 1;
    }
    if (req.method === 'POST' && req.url.startsWith('/_release?id=')) {
        const open = gates.get(decodeURIComponent(req.url.slice('/_release?id='.length)));
        res.writeHead(open ? 200 : 404);
        res.end();
        if (open) open();
        return;
    }
    if (req.method === 'GET' && req.url === '/_rules') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(rules.report()));
        return;
    }
    if (req.method === 'GET' && req.url === '/_openai') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(openaiRules.report()));
        return;
    }
    if (req.method === 'GET' && req.url === '/_stats') {
        res.writeHead(200, { 'content-type': 'application/json' });
        // `gated`: the x-mock-ids of the answers held for a release now (a test releases those,
        // not ones that arrive while it does).
        res.end(JSON.stringify(Object.assign({ gated: [...gates.keys()] }, stats)));
        return;
    }
    const chunks = [];
    req.on('data', (c) => { chunks.push(c); stats.bodyBytes += c.length; });
    req.on('close', () => { if (!req.complete) stats.incompleteBodies++; });
    req.on('end', () => {
        const now = Date.now();
        if (req.method === 'POST' && req.url === '/v1/files') {
            // An upload (OpenAI's files endpoint takes multipart, not JSON): any body, answered
            // with what arrived, so a test can check that it came whole and how it was framed.
            const all = Buffer.concat(chunks);
            const sha256 = crypto.createHash('sha256').update(all).digest('hex');
            stats.requests++;
            stats.uploads.push({ bytes: all.length, sha256, chunked: req.headers['transfer-encoding'] === 'chunked' });
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ id: 'file-mock', object: 'file', bytes: all.length, sha256 }));
            return;
        }
        const kind = req.url.startsWith('/v1/messages') ? 'anthropic' : 'openai';
        const mock = req.headers['x-mock'] || '';
        stats.requests++;
        if (now < exhaustedUntil) stats.violations++;
        const key = req.headers['x-api-key'] || req.headers['authorization'] || '';
        stats.keys[key] = (stats.keys[key] || 0) + 1;
        stats.acceptEncoding.push(req.headers['accept-encoding'] || '');
        // The proxy's shared token (--token-file) must never reach the provider.
        if (req.headers['x-tollgate-token'] || req.url.startsWith('/t/')) stats.tokenLeaks++;
        stats.paths.push(req.url);
        // x-mock-answer-headers: added to whatever answer this request gets.
        let extra = {};
        try { extra = JSON.parse(req.headers['x-mock-answer-headers'] || '{}'); } catch (e) { extra = {}; }
        if (Object.keys(extra).length) {
            const writeHead = res.writeHead.bind(res);
            res.writeHead = (status, headers) => writeHead(status, Object.assign({}, headers || {}, extra));
        }
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
        const resetEpoch = Math.ceil(now / 1000) + Number(req.headers['x-mock-reset-s'] || 3);
        if (mock === 'unified-rejected')
            return error(res, 429, unifiedHeaders('rejected', resetEpoch), 'rate_limit_error', 'rate limited (mock plan)');
        if (mock === 'subscription-429')
            return error(res, 429, {}, 'rate_limit_error', 'Claude AI usage limit reached|' + resetEpoch);
        if (mock === 'head-chunked') { // a HEAD's answer that says chunked (and, being a HEAD's, has no body)
            res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
            res.end();
            return;
        }
        if (mock === 'continue-flood') { for (let i = 0; i < 20; i++) res.writeContinue(); return; } // never a final answer
        if (mock === 'early-hints') res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' }); // a 103 first
        if (RULES && kind === 'anthropic' && mock === '') return rules.serve(req, res, body, now);
        const responses = req.url === '/v1/responses';
        if (OPENAI_RULES && mock === '' && (responses || req.url === '/v1/chat/completions'))
            return openaiRules.serve(req, res, body, now, responses);
        if (quota(now).remaining === 0) {
            stats.refused++;
            const q = quota(now);
            return error(res, 429, Object.assign({ 'retry-after': String(Math.ceil((q.resetMs - now) / 1000)) }, sent(headersFor(kind, now))),
                'rate_limit_error', 'over the mock provider quota');
        }
        admitted.push(now);
        stats.concurrent++;
        stats.maxConcurrent = Math.max(stats.maxConcurrent, stats.concurrent);
        const headers = headersFor(kind, now);
        if (mock === 'unified-warning') Object.assign(headers, unifiedHeaders('allowed_warning', resetEpoch));
        const output = 5;
        let finished = false;
        const finish = () => { finished = true; stats.concurrent--; stats.outputTokens += output; stats.usageTokens += 11 + output; };
        // The proxy closed the connection before the answer was complete (its client left).
        res.on('close', () => { if (!finished && mock !== 'cut') { stats.aborted++; stats.concurrent--; finished = true; } });
        const pieces = ['Hel', 'lo ', 'wor', 'ld'];
        const gap = mock === 'slow' ? 150 : DELAY_MS;
        if (!body.stream) {
            // 'late': the whole answer waits for POST /_release?id=<x-mock-id> (or 20 s), as a
            // long generation that is not streamed sends nothing until it is done.
            // 'headers-first': its headers go at once, its body after the release.
            // 'late-429': a 429 (retry-after 7) after the release.
            if (mock === 'late' || mock === 'headers-first' || mock === 'late-429') {
                if (mock === 'headers-first') {
                    res.writeHead(200, Object.assign({ 'content-type': 'application/json' }, sent(headers)));
                    res.flushHeaders();
                }
                const id = String(req.headers['x-mock-id'] || '');
                const answer = () => {
                    if (finished) return; // the proxy left meanwhile
                    if (mock === 'late-429') {
                        error(res, 429, { 'retry-after': '7' }, 'rate_limit_error', 'rate limited (mock)');
                        finish();
                        return;
                    }
                    if (!res.headersSent) res.writeHead(200, Object.assign({ 'content-type': 'application/json' }, sent(headers)));
                    res.end(JSON.stringify({ id: 'x', type: 'message', role: 'assistant', model: body.model,
                        content: [{ type: 'text', text: pieces.join('') }], stop_reason: 'end_turn',
                        usage: anthropicUsage(req, output) }));
                    finish();
                };
                const timer = setTimeout(() => { gates.delete(id); stats.gateTimeouts++; answer(); }, 20000);
                gates.set(id, () => { gates.delete(id); clearTimeout(timer); answer(); });
                return;
            }
            setTimeout(() => {
                res.writeHead(200, Object.assign({ 'content-type': 'application/json' }, sent(headers)));
                const usage = kind === 'anthropic' ? anthropicUsage(req, output)
                    : { prompt_tokens: 11, completion_tokens: output, total_tokens: 11 + output };
                res.end(JSON.stringify(kind === 'anthropic'
                    ? { id: 'x', type: 'message', role: 'assistant', model: body.model,
                        content: [{ type: 'text', text: pieces.join('') }], stop_reason: 'end_turn', usage }
                    : { id: 'x', object: 'chat.completion', model: body.model,
                        choices: [{ index: 0, message: { role: 'assistant', content: pieces.join('') }, finish_reason: 'stop' }],
                        usage }));
                finish();
            }, gap);
            return;
        }
        res.writeHead(200, Object.assign({ 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }, sent(headers)));
        const streamStart = process.hrtime.bigint();
        const events = [];
        if (kind === 'anthropic') {
            events.push({ type: 'message_start', message: { id: 'x', usage: anthropicUsage(req, 1) } });
            for (const p of pieces) events.push({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: p } });
            events.push({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: output } });
            events.push({ type: 'message_stop' });
        } else {
            for (const p of pieces) events.push({ choices: [{ index: 0, delta: { content: p } }], usage: null });
            events.push({ choices: [], usage: { prompt_tokens: 11, completion_tokens: output, total_tokens: 11 + output } });
        }
        let i = 0;
        // Each event is due at a fixed time after the stream's start, as a remote provider's
        // would be: a timer that fires late (this process sharing the CPUs with the proxy and
        // the clients) delays that event, not every one after it. Node's timers have a 1 ms
        // granularity, so a gap of 0 is 1 ms.
        const step = Math.max(gap, 1);
        let due = performance.now();
        // A gated stream pauses after its first text (Anthropic: message_start, then it).
        const gateAt = mock === 'gated' ? (kind === 'anthropic' ? 2 : 1) : -1;
        const next = () => {
            if (finished) return; // aborted
            if (mock === 'cut' && i === 2) { finished = true; res.socket.destroy(); stats.concurrent--; return; }
            if (mock === 'hang' && i === 1) return; // silent from here on, the connection open
            if (i < events.length) {
                const e = events[i++];
                const line = (e.type ? 'event: ' + e.type + '\n' : '') + 'data: ' + JSON.stringify(e) + '\n\n';
                if (i === gateAt) {
                    // The gate is set before its text goes out: the client may answer at once.
                    const id = String(req.headers['x-mock-id'] || '');
                    const opened = () => { due = performance.now(); next(); };
                    const timer = setTimeout(() => { gates.delete(id); stats.gateTimeouts++; opened(); }, 10000);
                    gates.set(id, () => { gates.delete(id); clearTimeout(timer); opened(); });
                    res.write(line);
                    return;
                }
                res.write(line);
                due += step;
                setTimeout(next, Math.max(0, due - performance.now()));
                return;
            }
            if (kind === 'openai') res.write('data: [DONE]\n\n');
            res.end();
            stats.streams++;
            stats.streamMs.push(Number(process.hrtime.bigint() - streamStart) / 1e6);
            if (stats.streamMs.length > STREAM_TIMES) stats.streamMs.shift();
            finish();
        };
        next();
    });
};
const server = TLS_CERT
    ? https.createServer({ cert: fs.readFileSync(TLS_CERT), key: fs.readFileSync(TLS_KEY) }, handler)
    : http.createServer(handler);
server.on('connection', () => { stats.connections++; });
server.keepAliveTimeout = 5000;
server.listen(0, '127.0.0.1', () => {
    process.stdout.write(String(server.address().port) + '\n');
});
process.on('SIGTERM', () => process.exit(0));
