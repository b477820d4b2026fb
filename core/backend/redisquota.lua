-- Tollgate's shared quota on Redis: every operation of QuotaBackend (core/backend/quotabackend.h)
-- is one call of this code, run atomically on the server in one round trip: FCALL of it loaded
-- as a function library (RedisConnection::callFunction), or EVALSHA where functions are refused. It mirrors
-- QuotaPolicy and RollingWindow (core/quota/*.cpp) rule by rule; tst_redisdifferential runs the
-- file home and a Redis home through one long random sequence, and through phases that reach
-- every cap (waiters, slots, the longest window and hold, the longest stop), and compares every
-- decision.
--
-- Constants: the ones this code shares with the C++ (bucket counts, leases, caps, NEVER, the
-- defaults of a provider's limits, the wait-reason numbers R_*, the history's event names
-- EVENT.*) are NOT written here. At build time redisquotaprelude (core/backend/
-- redisquotaprelude.cpp), compiled against the headers that define them, prints them as
-- `local` lines, and cmake/embedredisscript.cmake puts those in place of the marker line below
-- before the text is compiled into the library; the script's SHA1 and function name are taken
-- from that final text. The build fails if the marker is missing or if this file defines a
-- generated name itself. Constants below the marker are the script's own.
--
-- Keys (every key of a home shares its hash tag, so a Redis Cluster keeps them in one slot):
--   KEYS[1] limits   hash  provider -> limits, compact JSON written by the client (times in ms)
--   KEYS[2] state    hash  "g" -> globals, "p:<provider>" -> provider state, "q:<ticket>" -> a
--                          waiter of a provider's queue (all MessagePack; see "Waiters")
--   KEYS[3] history  stream, field "e": one line of history.jsonl; capped (XADD MAXLEN ~)
--   KEYS[4] home     string: the home's marker, set when its first limits are set
--   KEYS[5] corrupt  hash  "<field>@<ms>" -> a state value that did not decode, set aside
-- ARGV: op, now ("" = the server's TIME: one clock for every host), channel prefix, history
-- cap, the op's arguments (MessagePack). The reply is one MessagePack map: {ok = true, ...} or
-- {err = KIND, msg = TEXT}.
--
-- Invariants:
-- - All or nothing: a script that refuses returns before it writes anything; otherwise it
--   writes everything it decided at the end (Redis does not roll a script back). What could
--   make a write fail (a key of another type, a command or channel the user's ACL denies) is
--   checked before the first write (preflight); the state is the commit point, and the
--   history and wake-ups after it are best effort, a failure there a warning in the reply.
--   Limits are checked field by field before they are enforced (limitsProblem).
-- - Numbers are integers below 2^53 (times in unix ms, counts bounded by the limits);
--   NEVER (2^53) stands for "no time" (INT64_MAX in C++).
-- - Liveness: the script cannot see processes. A holder or waiter of the calling host is
--   alive unless the caller names it dead (deadF: fences, deadT: tickets), after probing it;
--   one of another host is alive until its lease ends.
-- - A provider with limits but no state lost its state (a restart without persistence, an
--   eviction): it restarts conservatively, windows full, as a corrupt state file does, and
--   its slots held by placeholders that running holders take back (see "Lost data" below).
-- - Stalls: leases are judged on the server's clock, which runs on while the server does not
--   (SIGSTOP, CLIENT PAUSE, a long load): time in which a provider was served no call does
--   not count against its leases beyond what a live holder may let pass (see "Stalls").

-- @TOLLGATE_GENERATED_CONSTANTS@
-- Two numbers the C++ writes as bare literals (no name to generate them from):
local MAX_CONSECUTIVE_429 = 1048576 -- 1 << 20, the clamp of consecutive429 (QuotaPolicy::apply429)
local MINUTE_MS = 60000 -- the provider's reported limits are per minute (LimitMismatch)

-- Per call: set by main() at the start of every call. As a Redis function (the library is
-- loaded once and kept) these locals outlive a call, so main() must reset every one of them.
local evalKeys, evalArgv -- run by EVALSHA: the globals, read before the locals hide them
if not redis.register_function then evalKeys, evalArgv = KEYS, ARGV end
local KEYS, ARGV
local op, now, channel, historyCap, a, myHost, deadF, deadT
-- now is the server's own TIME (not a test's clock): only then is a gap in it a stall.
local serverClock
-- Calendar days: { [day reset text] = { b0, b1, b2, b3 } }, consecutive day starts the client
-- computed with the time-zone database around its clock (ARGV[6]); the script takes the day
-- that holds its own `now`. A day it was not given ends the operation before it writes
-- anything, asking for it (needday): the client computes it and calls again.
local daySpans
local events, ring, dirty, limitsCache -- dirty: state fields to write, field -> table
-- The caller's queue ticket (ops.admit), never rung: it hears the reply.
local callerTicket
-- What failed after the commit point (the history, a wake-up): the operation happened, the
-- reply says so and carries these (warn), the client shows them as warnings.
local afterCommit

local function reply(t)
    t.ok = true
    if afterCommit and #afterCommit > 0 then t.warn = table.concat(afterCommit, '; ') end
    return cmsgpack.pack(t)
end
local function refuse(kind, msg)
    return cmsgpack.pack({ err = kind, msg = msg })
end

local function plus(x, y)
    local r = x + y
    if r > NEVER then return NEVER end
    if r < -NEVER then return -NEVER end
    return r
end
local function clamp(v, lo, hi)
    if v < lo then return lo end
    if v > hi then return hi end
    return v
end
-- (The main chunk is near Lua's limit of 200 locals: helpers of one function live in a block.)
local sortedKeys
do
    local NO_KEYS = {} -- sortedKeys of nothing (most providers have no model classes); never written
    sortedKeys = function(t)
        if not t or next(t) == nil then return NO_KEYS end
        local k = {}
        for name in pairs(t) do k[#k + 1] = name end
        table.sort(k)
        return k
    end
end
local function byWhom(what, who)
    if who == nil or who == '' then return what end
    if what == '' then return 'by ' .. who end
    return what .. ' (by ' .. who .. ')'
end
local function event(type, provider)
    if type == nil then error('a history event of no known type (a misspelt EVENT name)') end
    local e = { t = now, type = type }
    if provider and provider ~= '' then e.provider = provider end
    events[#events + 1] = e
    return e
end

-- RollingWindow -------------------------------------------------------------------------------

local function width(w)
    local g = math.floor(w / BUCKETS)
    if w % BUCKETS ~= 0 then g = g + 1 end
    if g < 1 then g = 1 end
    return g
end
-- A window is { w = length, b = SLOTS buckets of 3 (index, requests, tokens) } and, while its
-- scope splits tokens (its limits have an input or output budget), x = SLOTS pairs (input,
-- output). A scope is a window with its name (m) and, while it has a per-day budget, a day
-- (dy): a window of DAY_MS. (A calendar day needs the time-zone database: the client refuses
-- one on this home, see RedisQuotaBackend.)
local DAY_MS = 24 * 3600 * 1000
local function newWindow(model, w, split)
    local b = {}
    for s = 0, SLOTS - 1 do
        b[3 * s + 1] = -1
        b[3 * s + 2] = 0
        b[3 * s + 3] = 0
    end
    local win = { m = model, w = clamp(w, 1, MAX_WINDOW_MS), b = b }
    if split then
        local x = {}
        for i = 1, 2 * SLOTS do x[i] = 0 end
        win.x = x
    end
    return win
end
local function oldest(sc, t)
    return math.floor((t - sc.w) / width(sc.w))
end
-- requests, tokens, input, output counted at t
local function usage(sc, t)
    local lo = oldest(sc, t)
    local b, x = sc.b, sc.x
    local r, k, i, o = 0, 0, 0, 0
    for s = 0, SLOTS - 1 do
        local at = b[3 * s + 1]
        if at >= 0 and at >= lo then
            r = r + b[3 * s + 2]
            k = k + b[3 * s + 3]
            if x then
                i = i + x[2 * s + 1]
                o = o + x[2 * s + 2]
            end
        end
    end
    return r, k, i, o
end
local function bump(arr, at, v)
    arr[at] = clamp(arr[at] + v, 0, MAX_BUCKET_COUNT)
end
local function record(sc, t, req, tok, inp, out)
    local k = math.floor(t / width(sc.w))
    local s = k % SLOTS
    local b, x = sc.b, sc.x
    -- A future bucket (the clock went back) is never overwritten: the amount folds into it.
    if b[3 * s + 1] ~= k and b[3 * s + 1] < k then
        b[3 * s + 1] = k
        b[3 * s + 2] = 0
        b[3 * s + 3] = 0
        if x then
            x[2 * s + 1] = 0
            x[2 * s + 2] = 0
        end
    end
    bump(b, 3 * s + 2, req)
    bump(b, 3 * s + 3, tok)
    if x then
        bump(x, 2 * s + 1, inp or 0)
        bump(x, 2 * s + 2, out or 0)
    end
end
-- amounts and limits: { requests, tokens, input, output }; a negative limit is none
local function fitsUnder(u1, u2, u3, u4, a, l)
    return (l[1] < 0 or u1 + a[1] <= l[1]) and (l[2] < 0 or u2 + a[2] <= l[2])
        and (l[3] < 0 or u3 + a[3] <= l[3]) and (l[4] < 0 or u4 + a[4] <= l[4])
end
-- ur..uo: usage(sc, t), when the caller has it already (one pass over the ring less).
local function whenFits(sc, t, a, l, ur, uk, ui, uo)
    if not fitsUnder(0, 0, 0, 0, a, l) then return NEVER end
    if not ur then ur, uk, ui, uo = usage(sc, t) end
    if fitsUnder(ur, uk, ui, uo, a, l) then return t end
    local lo = oldest(sc, t)
    local live = {}
    local b, x = sc.b, sc.x
    for s = 0, SLOTS - 1 do
        local i = b[3 * s + 1]
        if i >= 0 and i >= lo then
            local xi, xo = 0, 0
            if x then xi, xo = x[2 * s + 1], x[2 * s + 2] end
            live[#live + 1] = { i, b[3 * s + 2], b[3 * s + 3], xi, xo }
        end
    end
    table.sort(live, function(p, q) return p[1] < q[1] end)
    local g = width(sc.w)
    for _, e in ipairs(live) do
        ur, uk, ui, uo = ur - e[2], uk - e[3], ui - e[4], uo - e[5]
        local leaves = (e[1] + 1) * g + sc.w
        if fitsUnder(ur, uk, ui, uo, a, l) then return math.max(leaves, t) end
    end
    return NEVER
end
-- RollingWindow::boundFuture
local function boundFuture(sc, t)
    local k = math.floor(t / width(sc.w))
    local b, x = sc.b, sc.x
    local r, n, i, o, moved = 0, 0, 0, 0, false
    for s = 0, SLOTS - 1 do
        if b[3 * s + 1] > k + BUCKETS then
            r = r + b[3 * s + 2]
            n = n + b[3 * s + 3]
            b[3 * s + 1] = -1
            b[3 * s + 2] = 0
            b[3 * s + 3] = 0
            if x then
                i = i + x[2 * s + 1]
                o = o + x[2 * s + 2]
                x[2 * s + 1] = 0
                x[2 * s + 2] = 0
            end
            moved = true
        end
    end
    if moved then record(sc, t, r, n, i, o) end
    return moved
end
local function rescale(sc, w, t)
    if clamp(w, 1, MAX_WINDOW_MS) == sc.w then return end
    local r, k, i, o = usage(sc, t)
    local fresh = newWindow(sc.m, w, sc.x ~= nil)
    sc.w = fresh.w
    sc.b = fresh.b
    sc.x = fresh.x
    if r ~= 0 or k ~= 0 or i ~= 0 or o ~= 0 then record(sc, t, r, k, i, o) end
end
-- The split turned on: what the window holds has no known split, so its tokens count toward
-- both input and output; turned off, the pairs go.
local function setSplit(win, on)
    if not on then
        win.x = nil
        return
    end
    local x = {}
    for s = 0, SLOTS - 1 do
        x[2 * s + 1] = win.b[3 * s + 3]
        x[2 * s + 2] = win.b[3 * s + 3]
    end
    win.x = x
end

-- Limits ---------------------------------------------------------------------------------------

local function isInt(v, lo, hi)
    return type(v) == 'number' and v == v and math.floor(v) == v and v >= lo and v <= hi
end

local DEFAULT_LIMITS = { w = DEFAULT_WINDOW_MS, h = DEFAULT_HEADROOM_PERCENT, bb = DEFAULT_BACKOFF_BASE_MS,
    bc = DEFAULT_BACKOFF_CAP_MS, mh = DEFAULT_MAX_HOLD_MS }

-- A provider's limits as the client stores them (RedisStateCodec::compactLimits), checked field by
-- field against the ranges QuotaLimits::validate and RedisStateCodec::parseCompactLimits apply:
-- nil when they hold, else the problem, naming the field. Anyone who can write to the Redis can
-- write anything into the limits key, and the client calls such limits corrupt: the script must
-- not enforce them either (`"h":100000` made every request count as a thousandth of one). So an
-- operation that needs them fails closed, before it writes anything.
local BUDGET_KEYS = { { 'r', 'requests' }, { 't', 'tokens' }, { 'it', 'input_tokens' }, { 'ot', 'output_tokens' } }
local LEARNED_KEYS = { requests = 'r', tokens = 't', input_tokens = 'it', output_tokens = 'ot' }
local function shownValue(v)
    if type(v) == 'number' then return string.format('%.17g', v) end
    if type(v) == 'string' then return '"' .. string.sub(v, 1, 40) .. '"' end
    if v == nil then return 'nothing' end
    return 'a ' .. type(v)
end
local function rangeProblem(v, name, lo, hi, required)
    if v == nil then
        if required then return name .. ' is missing' end
        return nil
    end
    if not isInt(v, lo, hi) then
        return name .. ' must be a whole number from ' .. lo .. ' to ' .. hi .. ' (got ' .. shownValue(v) .. ')'
    end
    return nil
end
-- Limits as Tollgate's client writes them, and their checks (a table, not locals: the chunk
-- is near Lua's limit of 200 locals).
local LK = { kept = {}, count = 0, MAX = 256 }
-- The Lua pattern the client derives from a model class's glob (luaPatternOf in
-- redisstatecodec.cpp, byte for byte): a stored p must be it, or the class would pool other
-- models than its patterns say.
function LK.literal(c)
    if string.find(c, '^[a-zA-Z0-9]$') then return c end
    return '%' .. c
end
function LK.luaPatternOf(glob)
    local s, i, n = '^', 1, #glob
    while i <= n do
        local c = string.sub(glob, i, i)
        if c == '*' then
            if string.sub(s, -2) ~= '.*' then s = s .. '.*' end
        elseif c == '?' then
            s = s .. '.'
        elseif c == '\\' and i < n then
            i = i + 1
            s = s .. LK.literal(string.sub(glob, i, i))
        elseif c == '[' then
            local j = i + 1
            local negate = j <= n and (string.sub(glob, j, j) == '!' or string.sub(glob, j, j) == '^')
            if negate then j = j + 1 end
            local first = j
            if j <= n and string.sub(glob, j, j) == ']' then j = j + 1 end
            while j <= n and string.sub(glob, j, j) ~= ']' do j = j + 1 end
            if j > n then
                s = s .. '%['
            else
                s = s .. (negate and '[^' or '[')
                for k = first, j - 1 do
                    local m = string.sub(glob, k, k)
                    if m == '-' and k > first and k + 1 < j then s = s .. '-' else s = s .. LK.literal(m) end
                end
                s = s .. ']'
                i = j
            end
        else
            s = s .. LK.literal(c)
        end
        i = i + 1
    end
    return s .. '$'
end
-- The exact bytes the client writes for decoded limits (compactLimits: nlohmann's dump, keys
-- sorted bytewise, no spaces, whole numbers as integers), or nil for a value it never writes. A
-- stored value must be those bytes: cjson reads what JSON does not allow (0x2, +2, 02, 2.,
-- [] for {} and {} for [], a key twice) and the client refuses, so the script refuses it too.
LK.ESC = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n', ['\r'] = '\\r',
    ['\t'] = '\\t' }
function LK.jsonString(v)
    local out = string.gsub(v, '[%z\1-\31"\\]', function(c)
        return LK.ESC[c] or string.format('\\u%04x', string.byte(c))
    end)
    return '"' .. out .. '"'
end
function LK.byteLess(x, y)
    for i = 1, math.min(#x, #y) do
        local a, b = string.byte(x, i), string.byte(y, i)
        if a ~= b then return a < b end
    end
    return #x < #y
end
-- What each object may hold (compactLimits): its keys and what their values are ('list': a
-- list of strings; 'models': class name -> 'class'; nil: a number or a string). An empty list
-- or object, a false ln, a key of another place: the client never writes them, and refuses them.
LK.SHAPES = {
    provider = { r = 0, t = 0, it = 0, ot = 0, d = 'day', dz = 0, w = 0, par = 0, h = 0, bb = 0, bc = 0, mh = 0,
        ln = 0, ld = 'list', m = 'models' },
    class = { r = 0, t = 0, it = 0, ot = 0, d = 'day', g = 'list', p = 'list', w = 0, ld = 'list' },
    day = { r = 0, t = 0, it = 0, ot = 0 },
}
function LK.canonical(v, shape, key)
    local t = type(v)
    if shape == 0 then
        if key == 'ln' then
            if v ~= true then return nil end
            return 'true'
        end
        if t == 'string' then return LK.jsonString(v) end
        if t ~= 'number' or v ~= v or v ~= math.floor(v) or v > 2 ^ 53 or v < -2 ^ 53 then return nil end
        return string.format('%d', v)
    end
    if t ~= 'table' or next(v) == nil then return nil end
    local parts = {}
    if shape == 'list' then
        local n = #v
        for k in pairs(v) do
            if type(k) ~= 'number' or k < 1 or k > n or k ~= math.floor(k) then return nil end
        end
        for i = 1, n do
            if type(v[i]) ~= 'string' then return nil end
            parts[i] = LK.jsonString(v[i])
        end
        return '[' .. table.concat(parts, ',') .. ']'
    end
    local keys = {}
    for k in pairs(v) do
        if type(k) ~= 'string' then return nil end
        keys[#keys + 1] = k
    end
    table.sort(keys, LK.byteLess)
    local fields = LK.SHAPES[shape]
    for i, k in ipairs(keys) do
        local inner
        if shape == 'models' then inner = 'class' else inner = fields[k] end
        if inner == nil then return nil end
        local e = LK.canonical(v[k], inner, k)
        if not e then return nil end
        parts[i] = LK.jsonString(k) .. ':' .. e
    end
    return '{' .. table.concat(parts, ',') .. '}'
end
local function validName(name)
    return type(name) == 'string' and #name >= 1 and #name <= 64 and not string.find(name, '[^%w%._%-:@]')
end
-- The per-window budget of a scope (the provider, or a class: o) and its day (o.d).
local function budgetProblem(o, where)
    for _, k in ipairs(BUDGET_KEYS) do
        local why = rangeProblem(o[k[1]], where .. k[1] .. ' (' .. k[2] .. ')', 1, LIMIT_MAX_COUNT, false)
        if why then return why end
    end
    if o.d == nil then return nil end
    if type(o.d) ~= 'table' then return where .. 'd (per_day) is not an object' end
    for _, k in ipairs(BUDGET_KEYS) do
        local day = o.d[k[1]]
        local why = rangeProblem(day, where .. 'd.' .. k[1] .. ' (per_day.' .. k[2] .. ')', 1, LIMIT_MAX_COUNT, false)
        if why then return why end
        if day ~= nil and o[k[1]] ~= nil and day < o[k[1]] then
            return where .. 'd.' .. k[1] .. ' (per_day.' .. k[2] .. ') is below ' .. k[1] .. ' per window'
        end
    end
    return nil
end
local function learnedProblem(o, where)
    if o.ln ~= nil and type(o.ln) ~= 'boolean' then return where .. 'ln (learn) is not true or false' end
    if o.ld == nil then return nil end
    if type(o.ld) ~= 'table' then return where .. 'ld (learned) is not a list of names' end
    local previous = ''
    for _, name in ipairs(o.ld) do
        if type(name) ~= 'string' or not LEARNED_KEYS[name] or o[LEARNED_KEYS[name]] == nil or name <= previous then
            return where .. 'ld (learned) names ' .. shownValue(name) .. ': not a set limit, or out of order'
        end
        previous = name
    end
    return nil
end
local function patternsProblem(ml, where)
    if ml.g == nil and ml.p == nil then return nil end
    if type(ml.g) ~= 'table' or type(ml.p) ~= 'table' or #ml.g < 1 or #ml.g > LIMIT_MAX_PATTERNS
        or #ml.p ~= #ml.g then
        return where .. 'g and p (match) are not 1 to ' .. LIMIT_MAX_PATTERNS .. ' patterns each, as many of both'
    end
    for i, glob in ipairs(ml.g) do
        if type(glob) ~= 'string' or #glob < 1 or #glob > LIMIT_MAX_PATTERN or string.find(glob, '[%c,]') then
            return where .. 'g (match) holds a pattern that is empty, too long or holds a control character or a comma'
        end
        local _, globStars = string.gsub(glob, '%*', '')
        local pat = ml.p[i]
        if type(pat) ~= 'string' or #pat > 4 * LIMIT_MAX_PATTERN + 8 or string.sub(pat, 1, 1) ~= '^' then
            return where .. 'p holds a script pattern that is not an anchored string of its size'
        end
        if pat ~= LK.luaPatternOf(glob) then
            return where .. 'p (the script\'s patterns) is not what g (match) gives'
        end
        -- Each ".*" backtracks, inside the server: no more than the glob's own '*'s allow.
        local _, stars = string.gsub(pat, '%.%*', '')
        if globStars > LIMIT_MAX_STARS or stars > LIMIT_MAX_STARS then
            return where .. 'a model pattern has more than ' .. LIMIT_MAX_STARS .. ' \'*\''
        end
    end
    return nil
end
local function limitsProblem(provider, l)
    if type(l) ~= 'table' then return 'the limits are not a JSON object' end
    if not validName(provider) then return 'the provider\'s name is not one Tollgate gives' end
    local why = budgetProblem(l, '')
        or rangeProblem(l.w, 'w (window, ms)', LIMIT_MIN_WINDOW_MS, LIMIT_MAX_WINDOW_MS, true)
        or rangeProblem(l.par, 'par (parallel)', 1, LIMIT_MAX_PARALLEL, false)
        or rangeProblem(l.h, 'h (headroom_percent)', 1, 100, true)
        or rangeProblem(l.bb, 'bb (backoff base, ms)', 1, MAX_BACKOFF_MS, true)
        or rangeProblem(l.bc, 'bc (backoff cap, ms)', 1, MAX_BACKOFF_MS, true)
        or rangeProblem(l.mh, 'mh (max hold, ms)', LIMIT_MIN_HOLD_MS, MAX_HOLD_MS, true)
        or learnedProblem(l, '')
    if why then return why end
    if l.bb > l.bc then return 'bb (backoff base) is above bc (backoff cap)' end
    if l.dz ~= nil and (type(l.dz) ~= 'string' or #l.dz < 1 or #l.dz > 80) then
        return 'dz (day_resets) is not a day reset'
    end
    if l.m == nil then return nil end
    if type(l.m) ~= 'table' then return 'm (models) is not an object' end
    local n = 0
    for name, ml in pairs(l.m) do
        n = n + 1
        if not validName(name) then return 'm (models) names a class that is not a model name' end
        local where = 'm.' .. name .. '.'
        if type(ml) ~= 'table' then return where .. ' is not an object' end
        why = budgetProblem(ml, where)
            or rangeProblem(ml.w, where .. 'w (window, ms)', LIMIT_MIN_WINDOW_MS, LIMIT_MAX_WINDOW_MS, true)
            or patternsProblem(ml, where) or learnedProblem(ml, where)
        if why then return why end
    end
    if n > LIMIT_MAX_MODELS then return 'm (models) holds more than ' .. LIMIT_MAX_MODELS .. ' classes' end
    return nil
end
-- Limits decoded and checked, kept between calls by the exact string they were read from
-- (as the states are, below): an operation reads the string each time, but decodes and checks
-- it only when it changed. Every use of a provider's limits only reads them.
-- (A table, not locals: the chunk is near Lua's limit of 200 locals.)
-- (LK, declared above: kept = {}, count = 0, MAX = 256: homes x providers; past it, start over)
local function limitsOf(provider)
    if limitsCache[provider] ~= nil then return limitsCache[provider] end
    -- The length first (O(1)): a planted 10 MB value must not be copied and decoded by every call.
    local bytes = redis.call('HSTRLEN', KEYS[1], provider)
    if bytes > MAX_LIMITS_BYTES then
        return nil, 'the limits of \'' .. provider .. '\' in ' .. KEYS[1] .. ' hold ' .. bytes
            .. ' bytes, more than the ' .. MAX_LIMITS_BYTES .. ' a provider\'s limits may have; refused unread'
    end
    local raw = redis.call('HGET', KEYS[1], provider)
    local l = false
    local key = KEYS[1] .. '\n' .. provider
    local kept = LK.kept[key]
    if raw and kept and kept.raw == raw then
        l = kept.l
    elseif raw then
        local ok, v = pcall(cjson.decode, raw)
        local why = 'not JSON'
        if ok then why = limitsProblem(provider, v) end
        if not why and LK.canonical(v, 'provider') ~= raw then
            why = 'not as Tollgate writes them (a number, list or object JSON does not allow, a key twice or unknown, '
                .. 'or keys out of order)'
        end
        if why then
            return nil, 'the limits of \'' .. provider .. '\' in ' .. KEYS[1] .. ' are corrupt: ' .. why
        end
        l = v
        if kept == nil and LK.count >= LK.MAX then LK.kept, LK.count = {}, 0 end
        if kept == nil then LK.count = LK.count + 1 end
        LK.kept[key] = { raw = raw, l = l }
    end
    limitsCache[provider] = l
    return l
end
local function knownProviders()
    local names = redis.call('HKEYS', KEYS[1])
    table.sort(names)
    return names
end
local function effective(l, given)
    local e = math.floor(given * l.h / 100)
    if e < 1 then return 1 end
    return e
end
local function limitOrNone(l, v)
    if v then return effective(l, v) end
    return -1
end
-- A budget (the provider's or a class's limits per window, or their `d` per day) as limits
-- after the headroom: { requests, tokens, input, output }, -1: none.
-- Made once per budget: a provider's limits are decoded once per string and never changed
-- (limitsOf), so a budget table stands for its numbers; callers only read the result. (Kept
-- by the budget table; past MAX_BUDGETS, start over: limits replaced leave theirs behind.)
LK.budgets, LK.budgetCount, LK.MAX_BUDGETS = {}, 0, 4096
LK.NONE = { -1, -1, -1, -1 }
local function limitsOfBudget(l, b)
    if not b then return LK.NONE end
    local lim = LK.budgets[b]
    if lim and lim.h == l.h then return lim end
    lim = { limitOrNone(l, b.r), limitOrNone(l, b.t), limitOrNone(l, b.it), limitOrNone(l, b.ot), h = l.h }
    if LK.budgetCount >= LK.MAX_BUDGETS then LK.budgets, LK.budgetCount = {}, 0 end
    LK.budgetCount = LK.budgetCount + 1
    LK.budgets[b] = lim
    return lim
end
local function anyLimit(lim)
    return lim[1] >= 0 or lim[2] >= 0 or lim[3] >= 0 or lim[4] >= 0
end
local function splitBudget(b)
    return b ~= nil and (b.it ~= nil or b.ot ~= nil)
end
local function anyBudget(b)
    return b ~= nil and (b.r ~= nil or b.t ~= nil or b.it ~= nil or b.ot ~= nil)
end
-- The calendar day of l's day reset that holds t: start, end. Asks the client for it (an
-- error caught by main, before anything is written) when it was not given or does not hold t.
local function dayOf(l, t)
    local b = daySpans and daySpans[l.dz]
    if b then
        for i = 1, 3 do
            if type(b[i]) == 'number' and type(b[i + 1]) == 'number' and b[i] <= t and t < b[i + 1] then
                return b[i], b[i + 1]
            end
        end
    end
    error({ needday = l.dz }, 0)
end
-- What a scope's day holds at t: its rolling day's usage, or its calendar day's counts if that
-- day is still the current one.
local function dayUsage(sc, l, t)
    if sc.dy then return usage(sc.dy, t) end
    if sc.cu then
        local start = dayOf(l, t)
        if sc.cs == start then return sc.cu[1], sc.cu[2], sc.cu[3], sc.cu[4] end
    end
    return 0, 0, 0, 0
end
local function addDay(sc, r, k, i, o)
    bump(sc.cu, 1, r)
    bump(sc.cu, 2, k)
    bump(sc.cu, 3, i)
    bump(sc.cu, 4, o)
end

-- ModelLimits::matches: a class of patterns (p: anchored Lua patterns the client made of the
-- user's fnmatch patterns), or the model of its own name.
local function classMatches(name, ml, model)
    if model == '' then return false end
    if not ml.p then return model == name end
    for _, pat in ipairs(ml.p) do
        if string.find(model, pat) then return true end
    end
    return false
end
-- The budgets of a scope: the provider's (l) for '', else its class's; nil: none any more.
local function budgetsOf(l, name)
    if name == '' then return l end
    return l.m and l.m[name]
end

-- State ----------------------------------------------------------------------------------------

local function checkFields(t, spec)
    if type(t) ~= 'table' then return false end
    for k, kind in pairs(spec) do
        local v = t[k]
        if kind == 'int' then
            if not isInt(v, -NEVER, NEVER) then return false end
        elseif type(v) ~= kind then
            return false
        end
    end
    return true
end
local GLOBAL_SPEC = { nf = 'int', nt = 'int', pz = 'boolean', pr = 'string', pat = 'int' }
local PROVIDER_SPEC = { n = 'string', pz = 'boolean', pr = 'string', pa = 'int', c = 'int', bu = 'int',
    l4 = 'int', pu = 'int', la = 'int', at = 'int', rt = 'int', sc = 'table', sl = 'table' }
local SCOPE_SPEC = { m = 'string', w = 'int', b = 'table' }
local SLOT_SPEC = { f = 'int', pid = 'int', a = 'int', n = 'int', c = 'string', m = 'string', h = 'string',
    st = 'int', lu = 'int' }
local WAITER_SPEC = { tk = 'int', pid = 'int', e = 'int', d = 'int', n = 'int', c = 'string', m = 'string',
    s = 'boolean', r = 'int', h = 'string', st = 'int', lu = 'int' }

-- Waiters, each in a field of its own ----------------------------------------------------------
--
-- A provider's queue (p.q) holds only its tickets, in FIFO order, as one string of 16 digits
-- each (W.WIDTH; a ticket is at most NEVER, 2^53: 16 digits), so that reading and writing the
-- provider's state costs the same with 200 waiters as with none (a list of 200 numbers: 40 µs
-- more per call to decode, check and encode); each waiter is the field 'q:<ticket>' of the
-- state hash (tickets are global and only grow: a field is never reused).
-- A call reads the waiters it looks at (the head, its watcher, the caller's own entry) and
-- writes those that changed, so its cost does not grow with the queue: with the waiters inside
-- the provider's state, every call decoded and wrote them all (a queue of 200: 0.2 ms of Lua
-- per call for the decoding alone, most of an admission's server time). Only the rare calls
-- that judge every waiter (a stall, releaseStale, abandon, the clock going back) read them all.
-- A waiter's record is decoded once per string, as the states are (decode/keepDecoded); every
-- change to it goes through W.changed, which marks it to be written. A record that is missing
-- or does not decode (a partial loss, a forged value: it is set aside) is a ghost: passed at
-- once and dropped from the queue when it reaches the head; its waiter, when it next looks,
-- finds no entry and queues again. A state from before this layout, with whole waiters in q,
-- is converted when read (W.convert).
-- (The queue's helpers are fields of W: the script's main chunk is near Lua's 200 locals.)
-- Per call: rec (ticket -> waiter read or made), gone (fields to delete), ghosts (one was met),
-- read (provider -> its queue as read).
local W = { rec = {}, gone = {}, read = {}, PREFIX = 'q:', WIDTH = QUEUE_TICKET_DIGITS }
W.FORMAT = '%0' .. W.WIDTH .. 'd'
-- A per-call table, emptied for this call (made once: a table made anew each call grows its
-- hash part key by key, each growth an allocation; these were a fifth of a call's garbage).
-- Nothing keeps one of them past its call (what outlives a call is copied or kept by value).
-- One that held many (a call that read every waiter) is replaced instead: a table keeps the
-- room it grew to, and every later pass over it would walk that room.
function W.emptied(t)
    if t == nil then return {} end
    local n = 0
    for k in pairs(t) do
        t[k] = nil
        n = n + 1
    end
    if n > 32 then return {} end
    return t
end
-- An admission's arguments the client leaves out when at their default (RedisQuotaBackend::admit).
W.ADMIT_DEFAULTS = { __index = { model = '', tokens = 0, ['in'] = 0, out = 0, est = false, slot = false,
    deadlineIn = 0, lease = 0, ticket = 0, enqueue = false, waited = 0, first = '', ho = false } }
function W.field(tk)
    return W.PREFIX .. string.format('%d', tk)
end
function W.fmt(tk)
    return string.format(W.FORMAT, tk)
end
-- How many wait in p's queue; the ticket at place i (-1, never a real one, where the string
-- holds something else: a ghost); the place of ticket tk (nil: not queued).
function W.n(p)
    return #p.q / W.WIDTH
end
function W.at(p, i)
    local c = string.sub(p.q, (i - 1) * W.WIDTH + 1, i * W.WIDTH)
    if #c ~= W.WIDTH or string.find(c, '%D') then return -1 end
    return tonumber(c)
end
function W.indexOf(p, tk)
    local needle = W.fmt(tk)
    local from = 1
    while true do
        local at = string.find(p.q, needle, from, true)
        if not at then return nil end
        if (at - 1) % W.WIDTH == 0 then return (at - 1) / W.WIDTH + 1 end
        from = at + 1
    end
end
function W.removeAt(p, i)
    p.q = string.sub(p.q, 1, (i - 1) * W.WIDTH) .. string.sub(p.q, i * W.WIDTH + 1)
end
function W.append(p, tk)
    p.q = p.q .. W.fmt(tk)
end
function W.join(tickets)
    local parts = {}
    for i, tk in ipairs(tickets) do parts[i] = W.fmt(tk) end
    return table.concat(parts)
end
function W.changed(w)
    if w.tk ~= nil and W.rec[w.tk] == w and not w.lost then dirty[W.field(w.tk)] = w end
end
-- Taken out of the queue: its field is deleted at the commit.
function W.drop(tk)
    local field = W.field(tk)
    dirty[field] = nil
    W.gone[field] = true
end

-- A waiter's wake key (RedisQuotaBackend::m_wakeKey): its channel is channel .. 'w:' .. key.
function W.validKey(k)
    return type(k) == 'string' and #k >= 1 and #k <= 64 and not string.find(k, '[^%w%-_.]')
end

function W.validRecord(w)
    if not checkFields(w, WAITER_SPEC) then return false end
    -- Its wake key, when its turn came (hs), last seen (sn), its wake-up reached nobody (nr).
    -- What a release needs to admit it in its place (W.handOff): it holds what it waits for
    -- (hd), its estimate is one (x), its split (i, o), the lease it asked (ls).
    return not ((w.wk ~= nil and not W.validKey(w.wk)) or (w.hs ~= nil and not isInt(w.hs, -NEVER, NEVER))
        or (w.sn ~= nil and not isInt(w.sn, -NEVER, NEVER)) or (w.nr ~= nil and not isInt(w.nr, -NEVER, NEVER))
        or (w.hd ~= nil and w.hd ~= true) or (w.x ~= nil and w.x ~= true)
        or (w.i ~= nil and not isInt(w.i, 0, MAX_BUCKET_COUNT)) or (w.o ~= nil and not isInt(w.o, 0, MAX_BUCKET_COUNT))
        or (w.ls ~= nil and not isInt(w.ls, 1, NEVER)) or (w.hp ~= nil and not isInt(w.hp, 1, NEVER))
        or (w.hst ~= nil and not isInt(w.hst, 0, NEVER)))
end

local function validProvider(p)
    if not checkFields(p, PROVIDER_SPEC) or #p.sl > MAX_SLOTS then return false end
    -- The queue: a string of tickets (W.WIDTH digits each; one that holds something else is a
    -- ghost, W.at), or, in a state from before W's layout, the waiters themselves (W.convert).
    if type(p.q) == 'string' then
        if #p.q % W.WIDTH ~= 0 or W.n(p) > MAX_WAITERS then return false end
    elseif type(p.q) ~= 'table' or #p.q > MAX_WAITERS then
        return false
    end
    -- The provider's reported limits (noteLimits) are optional: a state from before them has none.
    if (p.ra ~= nil and not isInt(p.ra, 0, NEVER)) or (p.rr ~= nil and not isInt(p.rr, -1, MAX_REPORTED))
        or (p.rk ~= nil and not isInt(p.rk, -1, MAX_REPORTED)) or (p.ri ~= nil and not isInt(p.ri, -1, MAX_REPORTED))
        or (p.ro ~= nil and not isInt(p.ro, -1, MAX_REPORTED)) or (p.rs ~= nil and type(p.rs) ~= 'string') then
        return false
    end
    -- What the provider said remains (ops.remaining): optional, all three together.
    if p.qu ~= nil and (not isInt(p.qu, 0, NEVER) or not isInt(p.ql, 0, MAX_REPORTED) or type(p.qs) ~= 'string') then
        return false
    end
    local pl = p.pl
    if pl ~= nil and (type(pl) ~= 'table' or not isInt(pl.a, 1, NEVER) or not isInt(pl.s, 0, 3)
        or not isInt(pl.f, -1, MAX_PERMILLE) or not isInt(pl.fr, 0, NEVER) or not isInt(pl.v, -1, MAX_PERMILLE)
        or not isInt(pl.vr, 0, NEVER)) then
        return false
    end
    for _, sc in ipairs(p.sc) do
        -- The buckets' values are not checked one by one here (that cost a fifth of every
        -- call): one that is not a number fails the operation (fail closed, nothing written),
        -- and the client's decoder refuses it by name.
        if not checkFields(sc, SCOPE_SPEC) or sc.w < 1 or sc.w > MAX_WINDOW_MS or #sc.b ~= 3 * SLOTS then
            return false
        end
        -- The split and the day (absent in a state from before them).
        if (sc.x ~= nil and (type(sc.x) ~= 'table' or #sc.x ~= 2 * SLOTS)) or (sc.dy ~= nil and (type(sc.dy) ~= 'table'
            or sc.dy.w ~= DAY_MS or type(sc.dy.b) ~= 'table' or #sc.dy.b ~= 3 * SLOTS
            or (sc.dy.x ~= nil and (type(sc.dy.x) ~= 'table' or #sc.dy.x ~= 2 * SLOTS))
            or (sc.dy.x ~= nil) ~= (sc.x ~= nil))) then
            return false
        end
        if (sc.cs ~= nil or sc.cu ~= nil) and (sc.dy ~= nil or not isInt(sc.cs, 0, NEVER) or type(sc.cu) ~= 'table'
            or #sc.cu ~= 4) then
            return false
        end

    end
    for _, s in ipairs(p.sl) do
        if not checkFields(s, SLOT_SPEC) then return false end
        if (s.ei ~= nil and not isInt(s.ei, 0, MAX_BUCKET_COUNT)) or (s.eo ~= nil and not isInt(s.eo, 0, MAX_BUCKET_COUNT))
            or (s.tk ~= nil and not isInt(s.tk, 1, NEVER)) then
            return false
        end
    end
    if (p.wt ~= nil and not isInt(p.wt, 0, NEVER)) or (p.hw ~= nil and not isInt(p.hw, -NEVER, NEVER)) then
        return false
    end
    if type(p.q) == 'table' then
        local seen = {}
        for _, w in ipairs(p.q) do
            if type(w) ~= 'table' or not W.validRecord(w) or not isInt(w.tk, 1, NEVER) or seen[w.tk] then
                return false
            end
            seen[w.tk] = true
        end
    end
    return true
end

-- The set-aside hash's type is checked when a call first writes it, not by every call's
-- preflight: a set-aside is the first write of any call that makes one (limits operations,
-- which write first, still check every key before), so a key of another type refuses the
-- call with nothing written (main() returns the refusal). A wake-up to a waiter can come
-- before a set-aside in the same call (W.wake reads the next waiters after ringing one), so
-- the first one checks too (W.publish): nothing leaves a call that is then refused.
function W.checkAside()
    if not W.asideChecked then
        local t = redis.call('TYPE', KEYS[5])
        if type(t) == 'table' then t = t.ok end
        if t ~= 'none' and t ~= 'hash' then
            error({ refusal = refuse('corrupt', KEYS[5] .. ' is a ' .. tostring(t)
                .. ' where Tollgate keeps a hash (set there by something else?): nothing was changed') }, 0)
        end
        W.asideChecked = true
    end
end
function W.keepAside(field, raw)
    W.checkAside()
    redis.call('HSET', KEYS[5], field .. '@' .. now, raw)
end
local function setAside(field, raw, why)
    W.keepAside(field, raw)
    local e = event(EVENT.RESET, field == 'g' and '' or string.sub(field, 3))
    e.reason = why
end

-- Decoded states kept between calls (upvalues of the function library live until it is
-- loaded again), by the exact string they were decoded from or encoded to, so an operation
-- neither decodes nor validates the state the previous one wrote (most of a call's time).
-- A value is taken out when a call reads it (the call may change it, and may stop before it
-- writes) and put back only by commit(): beside the encoding it wrote, or, read and not
-- written, beside the string it was read from (every change to a state marks it dirty, so one
-- not dirty is as read: a look that writes nothing costs the next call nothing). Any other
-- writer, a restart or a set-aside changes the string, and then it is decoded and validated
-- as ever.
-- Under EVALSHA the script runs whole each time and starts with an empty cache.
local decoded, decodedCount = {}, 0
local readThisCall -- field -> { raw, v }: the states this call decoded or took from the cache
local MAX_DECODED = 8192 -- states and waiters kept at most (homes x (providers + waiters)); past it, start over
local function cacheKey(field)
    return KEYS[2] .. '\n' .. field
end

local function decode(field, raw, valid)
    if not raw then return nil end
    local key = cacheKey(field)
    local kept = decoded[key]
    if kept then
        decoded[key] = nil
        decodedCount = decodedCount - 1
        if kept.raw == raw then
            readThisCall[field] = kept -- { raw, v }: kept again by commit (keepDecoded)
            return kept.v
        end
    end
    if #raw > MAX_STATE_BYTES then return false end -- never decoded: set aside as one that did not
    local ok, v = pcall(cmsgpack.unpack, raw)
    if ok and valid(v) then
        readThisCall[field] = { raw = raw, v = v }
        return v
    end
    return false
end
local function keepDecoded(field, raw, v)
    local key = cacheKey(field)
    if decoded[key] == nil then
        if decodedCount >= MAX_DECODED then decoded, decodedCount = {}, 0 end
        decodedCount = decodedCount + 1
    end
    local entry = readThisCall[field] or {} -- the entry this call read, if any, is reused
    entry.raw, entry.v = raw, v
    decoded[key] = entry
end

-- A waiter's times as read, bounded by now (a clock that went back; boundTimes does the rest
-- of the state): done as each is read, so that no call has to look at them all.
function W.bound(w)
    local b = false
    if w.e > now then w.e, b = now, true end
    local lease = plus(now, WAITER_LEASE_MS)
    if w.lu > lease then w.lu, b = lease, true end
    if w.sn and w.sn > now then w.sn, b = now, true end
    if w.hs and w.hs > now then w.hs, b = now, true end
    if b then W.changed(w) end
end
-- The waiter of ticket tk, read at most once per call; a ghost (w.lost: why) when its record is
-- missing or did not decode (set aside in KEYS[5] and deleted, so it is set aside once).
function W.get(tk)
    local w = W.rec[tk]
    if w then return w end
    local field = W.field(tk)
    local raw = redis.call('HGET', KEYS[2], field)
    w = decode(field, raw, function(v) return tk >= 1 and W.validRecord(v) and v.tk == tk end)
    if not w then
        local why = 'its record ' .. field .. ' was missing from ' .. KEYS[2]
        if w == false then
            W.keepAside(field, raw)
            redis.call('HDEL', KEYS[2], field)
            why = 'its record ' .. field .. ' in ' .. KEYS[2] .. ' did not decode; set aside in ' .. KEYS[5]
        end
        w = { tk = tk, pid = 0, e = now, d = now, n = 0, c = '', m = '', s = false, r = 0, h = '', st = 0, lu = 0,
            lost = why }
        W.rec[tk] = w
        W.ghosts = true
        return w
    end
    W.rec[tk] = w
    W.bound(w)
    return w
end
-- A provider's state deleted (its limits removed): its waiters' fields go with it.
function W.deleteProvider(name)
    local field = 'p:' .. name
    local raw = redis.call('HGET', KEYS[2], field)
    if raw and #raw <= MAX_STATE_BYTES then
        local ok, v = pcall(cmsgpack.unpack, raw)
        if ok and type(v) == 'table' and type(v.q) == 'string' then
            for i = 1, W.n(v) do
                local tk = W.at(v, i)
                if tk >= 1 then redis.call('HDEL', KEYS[2], W.field(tk)) end
            end
        end
    end
    redis.call('HDEL', KEYS[2], field)
end
-- Every waiter of p, read (the rare calls that judge them all): for i, w in W.all(p).
function W.all(p)
    local i = 0
    return function()
        i = i + 1
        if i <= W.n(p) then return i, W.get(W.at(p, i)) end
    end
end
-- A state from before this layout (whole waiters in q): its waiters move to fields of their own.
function W.convert(p)
    if type(p.q) ~= 'table' then return false end
    local tickets = {}
    for i, w in ipairs(p.q) do
        W.rec[w.tk] = w
        dirty[W.field(w.tk)] = w
        W.bound(w)
        tickets[i] = w.tk
    end
    p.q = W.join(tickets)
    return true
end

local globalState -- per call (main)
local function global()
    if globalState then return globalState end
    local raw = redis.call('HGET', KEYS[2], 'g')
    local g = decode('g', raw, function(v) return checkFields(v, GLOBAL_SPEC) end)
    if g == false then
        setAside('g', raw, 'the global state in ' .. KEYS[2] .. ' did not decode; set aside in ' .. KEYS[5])
        -- Fences and tickets only grow: restart them past any time-based value seen so far.
        g = { nf = now * 1000, nt = now * 1000, pz = false, pr = '', pat = 0, f0 = now * 1000 }
        dirty['g'] = g
    elseif g == nil then
        -- A new home, or one whose data Redis lost. Fences and tickets start from the server's
        -- clock (in µs), so they still only grow across a loss: no caller holding an old fence
        -- can be mistaken for a newer one.
        g = { nf = now * 1000, nt = now * 1000, pz = false, pr = '', pat = 0, f0 = now * 1000 }
        dirty['g'] = g
    end
    globalState = g
    return g
end

-- Whether a fence was issued before this state began (f0: its first fence; a state without
-- one, or none at all, issued nothing it can vouch for): a holder of such a fence that the
-- state does not know lost its slot with the state's previous life.
local function issuedBefore(fence)
    local raw = redis.call('HEXISTS', KEYS[2], 'g')
    if raw == 0 and not globalState then return true end
    local g = global()
    return type(g.f0) == 'number' and fence < g.f0
end

local function newProvider(name)
    return { n = name, pz = false, pr = '', pa = 0, c = 0, bu = 0, l4 = 0, pu = 0, la = 0, at = 0, rt = 0,
        sc = {}, sl = {}, q = '' }
end
local function scope(p, model)
    for _, sc in ipairs(p.sc) do
        if sc.m == model then return sc end
    end
    return nil
end

-- QuotaPolicy::syncScope: the window's length, the split and the day follow the budgets.
local function syncScope(sc, b, l, t)
    local changed = false
    if sc.w ~= b.w then
        rescale(sc, b.w, t)
        changed = true
    end
    local split = splitBudget(b) or splitBudget(b.d)
    if split ~= (sc.x ~= nil) then
        setSplit(sc, split)
        if sc.dy then setSplit(sc.dy, split) end
        if split and sc.cu then
            sc.cu[3] = sc.cu[2]
            sc.cu[4] = sc.cu[2]
        end
        changed = true
    end
    -- The day: none, rolling (a window of 24 h) or calendar (the day's start and counts).
    local want = 'none'
    if anyBudget(b.d) then
        if l.dz then want = 'calendar' else want = 'rolling' end
    end
    local have = 'none'
    if sc.dy then have = 'rolling' elseif sc.cu then have = 'calendar' end
    if want ~= have then
        -- A day starts from what is known of it: at least what the window holds now (or, from
        -- the other kind of day, what that day held).
        local r, k, i, o = usage(sc, t)
        if have == 'rolling' then
            r, k, i, o = usage(sc.dy, t)
        elseif have == 'calendar' then
            r, k, i, o = sc.cu[1], sc.cu[2], sc.cu[3], sc.cu[4]
        end
        sc.dy, sc.cs, sc.cu = nil, nil, nil
        if want == 'rolling' then
            sc.dy = newWindow('', DAY_MS, split)
            sc.dy.m = nil
            record(sc.dy, t, r, k, i, o)
        elseif want == 'calendar' then
            sc.cs = dayOf(l, t)
            sc.cu = { r, k, i, o }
        end
        changed = true
    end
    return changed
end

-- A scope made now for its budgets, appended (QuotaPolicy's ensureScope).
local function ensureScope(p, l, name, t)
    local b = budgetsOf(l, name)
    local sc = scope(p, name)
    local changed = false
    if not sc then
        sc = newWindow(name, b.w, false)
        p.sc[#p.sc + 1] = sc
        changed = true
    end
    if syncScope(sc, b, l, t) then changed = true end
    return changed
end

-- QuotaPolicy::syncProvider: the provider's scope always; a class's once something counts in
-- it (made by admitApply), then kept in step with its budgets; a removed class's dropped.
local function syncProvider(p, l, t)
    local changed = ensureScope(p, l, '', t)
    local gone = false
    for _, sc in ipairs(p.sc) do
        if not (sc.m == '' or (l.m and l.m[sc.m])) then gone = true end
    end
    if gone then
        local kept = {}
        for _, sc in ipairs(p.sc) do
            if sc.m == '' or (l.m and l.m[sc.m]) then kept[#kept + 1] = sc end
        end
        p.sc = kept
        changed = true
    end
    for _, sc in ipairs(p.sc) do
        if sc.m ~= '' and syncScope(sc, l.m[sc.m], l, t) then changed = true end
    end
    return changed
end

local function fillConservatively(p, l, t)
    syncProvider(p, l, t)
    for _, m in ipairs(sortedKeys(l.m)) do ensureScope(p, l, m, t) end
    -- As if the whole limit had been admitted just now, in every budget.
    local function full(b)
        local lim = limitsOfBudget(l, b)
        return math.max(0, lim[1]), math.max(0, lim[2]), math.max(0, lim[3]), math.max(0, lim[4])
    end
    for _, sc in ipairs(p.sc) do
        local b = budgetsOf(l, sc.m)
        if b then
            record(sc, t, full(b))
            if sc.dy then record(sc.dy, t, full(b.d)) end
            if sc.cu then
                sc.cs = dayOf(l, t)
                sc.cu = { full(b.d) }
            end
        end
    end
    if l.par then
        -- Held as long as a live holder may go without vouching for itself
        -- (QuotaPolicy::placeholderHoldMs); holders still running take them back (reestablish).
        local hold = math.max(l.mh or DEFAULT_MAX_HOLD_MS, RENEWED_LEASE_MS)
        while #p.sl < l.par do
            p.sl[#p.sl + 1] = { f = 0, pid = 0, a = t, n = 0, c = '(unknown: state was reset)', m = '', h = '',
                st = 0, lu = plus(t, hold), ll = hold }
        end
    end
end

-- Lost data ------------------------------------------------------------------------------------
--
-- A provider whose state is gone while its limits are not (DEL, an eviction, a state set aside)
-- lost it; so did a home from which a holder that still runs renews a slot the home no longer
-- knows (FLUSHDB, a restart without persistence: the limits went too, and come back by an
-- import). Either way, what the lost state held is unknown, so the provider restarts as if its
-- limits had been spent just now (windows full for one window) and with every parallel slot
-- held by a placeholder (pid 0) until the longest a live holder may go without vouching for
-- itself; a `run` still running takes its slot back from a placeholder when it renews its lease
-- (its fence is older than the reset: fences restart at the reset's time in µs). Limits
-- imported into a provider that has no state are a restore (or limits of a quota used
-- elsewhere): they start the same way.
--
-- The marker of the last loss found, for status: field LOST_FIELD of the state hash, JSON
-- {"at": ms, "reason": text}. It lives in the state key, so a later loss takes it too, and the
-- next detection writes it again.
local LOST_FIELD = 'lost'
local lostNote -- per call: the marker to write with the rest (commit)
local function markLost(why)
    lostNote = cjson.encode({ at = now, reason = why })
end
-- When the home last lost data, if known (0: never found).
local function lostAt()
    local raw = redis.call('HGET', KEYS[2], LOST_FIELD)
    if not raw then return 0 end
    local ok, v = pcall(cjson.decode, raw)
    if ok and type(v) == 'table' and type(v.at) == 'number' then return v.at end
    return 0
end

-- Stalls -----------------------------------------------------------------------------------------
--
-- Leases run on the server's clock, which runs on while the server does not: stopped
-- (SIGSTOP), paused (CLIENT PAUSE), loading a large file, or unreachable. Without care every
-- lease of another host runs out during a stall longer than it, and the first call after it —
-- any host's — frees slots whose holders still run (their renewals could not get through).
-- So each provider's state keeps sv, the server time of the last call that served it (written
-- at most every SERVED_STEP_MS, which only makes a gap look longer). A gap in it is time in
-- which nobody's call for the provider was served; a live holder renews every third of its
-- lease (run: 10 s of 30 s), so a longer gap is a stall, or its holder is dead, and no more than
-- a third of the lease may be counted for it: every lease is moved on by the rest of the gap
-- before anything is judged. A dead holder is still freed: each call counts up to a third of
-- its lease, so its lease runs out after calls that come as often as it would have renewed.
-- Waiters (looking every few seconds, renewing when a third of their lease is gone) alike, by a
-- third of theirs; their deadline (real time) bounds them anyway. Only with the server's own
-- clock: a test's clock that jumps is no stall.
local SERVED_STEP_MS = 1000
local function discountStall(p, t)
    if not serverClock then return false end
    local changed = false
    local last = p.sv
    if type(last) == 'number' and last < t then
        local gap = t - last
        for _, s in ipairs(p.sl) do
            if s.lu ~= 0 then
                local length = s.ll
                if type(length) ~= 'number' or length < 1 then length = RENEWED_LEASE_MS end
                if s.pid == 0 then length = RENEWED_LEASE_MS end -- stands for run holders
                local more = gap - math.floor(length / 3)
                if more > 0 then
                    s.lu = plus(s.lu, more)
                    changed = true
                end
            end
        end
        -- (Each waiter is written by W.changed: the provider's own state is not changed here.)
        local more = gap - math.floor(WAITER_LEASE_MS / 3)
        if more > 0 then
            for _, w in W.all(p) do
                if w.lu ~= 0 then
                    w.lu = plus(w.lu, more)
                    W.changed(w)
                end
            end
        end
        -- A head looks every HEAD_LOOK_MS: a gap longer than its grace allows for is not its fault.
        more = gap - (HEAD_GRACE_MS - HEAD_LOOK_MS)
        if more > 0 then
            for _, w in W.all(p) do
                if w.hs then
                    w.hs = math.min(plus(w.hs, more), t)
                    if w.sn then w.sn = math.min(plus(w.sn, more), t) end
                    W.changed(w)
                end
            end
        end
    end
    if type(last) ~= 'number' or t - last >= SERVED_STEP_MS or last > t then
        p.sv = t
        changed = true
    end
    return changed
end

local providerStates -- per call (main)
-- A new state for provider `name` (limits l) after a lost one; `why`: the reset event's
-- reason (nil: already recorded).
local function restartConservatively(name, l, why)
    local p = newProvider(name)
    if serverClock then p.sv = now end
    if why then
        local e = event(EVENT.RESET, name)
        e.reason = why
    end
    -- Fences issued from now on are above now × 1000 µs, so a holder's older fence tells a
    -- slot the reset lost (taken back from a placeholder) from one issued since.
    local g = global()
    if g.nf < now * 1000 then
        g.nf = now * 1000
        dirty['g'] = g
    end
    fillConservatively(p, l, now)
    dirty['p:' .. name] = p
    providerStates[name] = p
    return p
end

-- The provider's state, with `l` its limits (false: none). Missing with limits: lost, so it
-- restarts conservatively; one that does not decode is set aside first.
local function providerOf(name, l)
    if providerStates[name] then return providerStates[name] end
    local field = 'p:' .. name
    local raw = redis.call('HGET', KEYS[2], field)
    local p = decode(field, raw, validProvider)
    if p == false then
        local why = 'the state of \'' .. name .. '\' in ' .. KEYS[2]
            .. ' did not decode; set aside in ' .. KEYS[5] .. ', restarting conservatively'
        setAside(field, raw, why)
        markLost(why)
        if l then return restartConservatively(name, l, nil) end
    elseif p == nil and l then
        local why = 'the state of \'' .. name .. '\' was missing from Redis (lost: a restart without persistence,'
            .. ' a flush or an eviction); windows restart full, slots held until their holders renew'
        markLost(why)
        return restartConservatively(name, l, why)
    end
    if not p then
        p = newProvider(name)
        if serverClock then p.sv = now end
        if l then fillConservatively(p, l, now) end
        dirty[field] = p
    else
        if W.convert(p) then dirty[field] = p end
        if discountStall(p, now) then dirty[field] = p end
        W.read[name] = p.q
    end
    providerStates[name] = p
    return p
end
local function touch(p)
    dirty['p:' .. p.n] = p
end

-- Liveness (see the invariants above) -------------------------------------------------------

-- QuotaPolicy::placeholderEnd: its lease (one window for one from before placeholders had one).
local function placeholderEnd(s, l)
    if s.lu ~= 0 then return s.lu end
    return plus(s.a, l.w)
end
local function leaseEnd(s, l)
    if s.lu ~= 0 then return s.lu end
    return plus(s.a, l.mh)
end
local function whyHolderGone(s, l, t)
    if s.pid == 0 then
        if t < placeholderEnd(s, l) then return '' end
        return 'placeholder expired'
    end
    if s.h == myHost and myHost ~= '' then
        if deadF[s.f] then return 'holder died' end
        return ''
    end
    if t < leaseEnd(s, l) then return '' end
    return 'lease expired (holder pid ' .. s.pid .. ' on another host)'
end
local function whyWaiterGone(w, t)
    if w.lost then return w.lost end
    if t > plus(w.d, GHOST_GRACE_MS) then return 'waiter vanished past its deadline' end
    if w.h == myHost and myHost ~= '' then
        if deadT[w.tk] then return 'waiter died' end
        return ''
    end
    if w.lu ~= 0 and t > w.lu then return 'waiter stopped renewing (another host)' end
    return ''
end

local function reclaimWhere(p, t, why)
    local kept, n = {}, 0
    for _, s in ipairs(p.sl) do
        local reason = why(s)
        if reason == '' then
            kept[#kept + 1] = s
        else
            local e = event(EVENT.RECLAIM, p.n)
            e.caller = s.c
            e.model = s.m
            e.pid = s.pid
            e.fence = s.f
            e.reason = reason
            n = n + 1
        end
    end
    p.sl = kept
    return n
end
local function reclaimVanished(p, t)
    return reclaimWhere(p, t, function(s)
        if s.pid == 0 or (s.h ~= myHost and s.lu == 0) then return '' end
        return whyHolderGone(s, DEFAULT_LIMITS, t)
    end)
end
local function reclaimSlots(p, l, t, overdue, who)
    local by = ''
    if who and who ~= '' then by = ' (by ' .. who .. ')' end
    return reclaimWhere(p, t, function(s)
        local why = whyHolderGone(s, l, t)
        if why ~= '' then return why .. by end
        if s.pid ~= 0 and overdue and s.a < t - l.mh then return 'held past the maximum hold time' .. by end
        return ''
    end)
end
local function pruneQueueHead(p, t)
    local changed = false
    while p.q ~= '' do
        local w = W.get(W.at(p, 1))
        local why = whyWaiterGone(w, t)
        if why == '' then break end
        local e = event(EVENT.GAVE_UP, p.n)
        e.caller = w.c
        e.model = w.m
        e.pid = w.pid
        e.waited_ms = t - w.e
        e.reason = why
        W.removeAt(p, 1)
        W.drop(w.tk)
        changed = true
    end
    return changed
end
-- The caller's own queue entry, found once per call (each look over a long queue costs).
function W.find(p, ticket)
    if ticket == 0 or not W.indexOf(p, ticket) then return nil end
    local w = W.get(ticket)
    if w.lost then return nil end -- its record is gone: it queues again
    return w
end
local function renewWaiter(w, t)
    if w.lu - t > math.floor(WAITER_LEASE_MS * 2 / 3) then return false end
    w.lu = t + WAITER_LEASE_MS
    W.changed(w)
    return true
end
-- A waiter that looks: seen now (sn, at most every SEEN_STEP_MS: a look that changes nothing
-- else writes nothing), reachable again, at its current wake key.
W.SEEN_STEP_MS = 250
function W.saw(w, t, wake)
    if not W.validKey(wake) then wake = nil end
    local changed = false
    if w.nr or w.wk ~= wake then
        w.nr, w.wk = nil, wake
        changed = true
    end
    if not w.sn or t - w.sn >= W.SEEN_STEP_MS or w.sn > t then
        w.sn = t
        changed = true
    end
    if changed then W.changed(w) end
    return changed
end
local function dequeue(p, ticket)
    local i = W.indexOf(p, ticket)
    if i then
        W.removeAt(p, i)
        W.drop(ticket)
        return true
    end
    return false
end

-- The head of the queue (RedisQuotaBackend's "Waking" and "A dead head is passed") ----------------
--
-- The queue is strict FIFO: only its head may be admitted. A waiter that does not answer its
-- turn is passed, not removed: it keeps its place and is the head again when it next looks.
-- Passed: its wake-up reached no subscriber since it last looked (nr: its process, or at least
-- its connection, is gone), or, of another host than the caller's (this host's are probed by
-- the caller), its turn came (hs) and it has not been seen (sn) for HEAD_GRACE_MS since.
function W.passed(w, t)
    if w.nr or w.lost or deadT[w.tk] then return true end
    if w.h == myHost and myHost ~= '' then return false end
    if not w.hs then return false end -- its turn has not come: nobody could expect it yet
    return t > plus(math.max(w.sn or w.e, w.hs), HEAD_GRACE_MS)
end
-- The index of the waiter whose turn it is (the caller's own entry, `ticket`, is never
-- passed: it is here); nil when every waiter is passed.
function W.head(p, t, ticket)
    for i = 1, W.n(p) do
        local tk = W.at(p, i)
        if tk == ticket or not W.passed(W.get(tk), t) then return i end
    end
    return nil
end
-- The waiter after the head, not passed: the watcher, who looks when the head would go stale.
function W.watcher(p, h, t)
    for i = h + 1, W.n(p) do
        if not W.passed(W.get(W.at(p, i)), t) then return i end
    end
    return nil
end

-- When the watcher of head hw looks next: when the head would go stale (W.passed).
function W.watchIn(hw)
    return clamp(plus(math.max(hw.sn or hw.e, hw.hs or now), HEAD_GRACE_MS) + 1 - now, HEAD_LOOK_MS, HEAD_GRACE_MS + 1)
end
-- Whether head w surely cannot be admitted now (its look would change nothing but its being
-- seen): the provider or everything paused, or every parallel slot held while it wants one.
function W.blocked(p, w)
    if p.pz or (globalState and globalState.pz) then return true end
    local l = limitsOf(p.n)
    return w.s == true and type(l) == 'table' and l.par ~= nil and #p.sl >= l.par
end

-- Policy ---------------------------------------------------------------------------------------

local function backoffUntil(p, t)
    return math.min(p.bu, plus(t, MAX_STOP_MS))
end
local boundTimes
do
-- obj[key] at most max; true when it was more (no closure made per call: runs on every admission).
local function atMost(obj, key, max)
    if obj[key] > max then
        obj[key] = max
        return true
    end
    return false
end
boundTimes = function(g, p, l, t)
    local changed = atMost(p, 'bu', plus(t, MAX_STOP_MS))
    if atMost(p, 'pu', plus(math.max(p.bu, t), math.max(0, l.w))) then changed = true end
    if p.qu and atMost(p, 'qu', plus(t, MAX_STOP_MS)) then changed = true end
    if atMost(p, 'la', t) then changed = true end
    if atMost(p, 'l4', t) then changed = true end
    if atMost(p, 'pa', t) then changed = true end
    if g.pat > t then
        g.pat = t
        dirty['g'] = g
    end
    if p.c < 0 then
        p.c = 0
        changed = true
    end
    local slotLease = plus(t, MAX_HOLD_MS)
    for _, s in ipairs(p.sl) do
        if atMost(s, 'a', t) then changed = true end
        if atMost(s, 'lu', slotLease) then changed = true end
    end
    -- (The waiters' times are bounded as each is read: W.bound.)
    for _, sc in ipairs(p.sc) do
        if boundFuture(sc, t) then changed = true end
        if sc.dy and boundFuture(sc.dy, t) then changed = true end
        -- A calendar day that starts in the future is kept as today's.
        if sc.cu and sc.cs > t then
            sc.cs = dayOf(l, t)
            changed = true
        end
    end
    return changed
end
end

-- QuotaPolicy::costOf: { requests, tokens, input, output } of a request; an unknown split
-- counts its tokens toward each.
local function costOf(r)
    local inp = clamp(r['in'] or 0, 0, MAX_BUCKET_COUNT)
    local out = clamp(r.out or 0, 0, MAX_BUCKET_COUNT)
    local tok = clamp(r.tokens, 0, MAX_BUCKET_COUNT)
    if inp == 0 and out == 0 then return { 1, tok, tok, tok } end
    return { 1, inp + out, inp, out }
end

local impossible
do
-- Why the request's tokens can never fit budget b (per `per`) of scope `name`; nil: they can.
-- (No closures made per call: this runs on every admission.)
local function overBudget(l, r, cost, split, name, b, per)
    local lim = limitsOfBudget(l, b)
    local want, li, what = cost[2], lim[2], 'tokens'
    if not (li >= 0 and want > li) and split then
        want, li, what = cost[3], lim[3], 'input tokens'
        if not (li >= 0 and want > li) then want, li, what = cost[4], lim[4], 'output tokens' end
    end
    if not (li >= 0 and want > li) then return nil end
    local who = 'provider \'' .. r.provider .. '\''
    if name ~= '' then who = 'model class \'' .. name .. '\'' end
    return 'asks for ' .. want .. ' ' .. what .. ', but ' .. who .. ' allows ' .. li .. ' per ' .. per
end
local function impossibleIn(l, r, cost, split, name)
    local b = budgetsOf(l, name)
    return overBudget(l, r, cost, split, name, b, 'window') or (b.d and overBudget(l, r, cost, split, name, b.d, 'day'))
end
impossible = function(l, r)
    if r.tokens < 0 or (r['in'] or 0) < 0 or (r.out or 0) < 0 then return 'a negative number of tokens' end
    if r.est then return nil end
    local cost = costOf(r)
    local split = (r['in'] or 0) > 0 or (r.out or 0) > 0
    local why = impossibleIn(l, r, cost, split, '')
    if why then return why end
    for _, m in ipairs(sortedKeys(l.m)) do
        if classMatches(m, l.m[m], r.model) then
            why = impossibleIn(l, r, cost, split, m)
            if why then return why end
        end
    end
    return nil
end
end

-- QuotaPolicy's capped: an estimate ('all') is checked capped at every limit, a stated total
-- whose split is unknown ('split') at the input and output limits, a stated split not at all.
local function capOf(r)
    if r.est then return 'all' end
    if (r['in'] or 0) == 0 and (r.out or 0) == 0 then return 'split' end
    return nil
end
local function capped(cost, lim, how)
    if not how then return cost end
    local first = 3
    if how == 'all' then first = 1 end
    local out
    for i = first, 4 do
        if lim[i] >= 0 and cost[i] > lim[i] then
            out = out or { cost[1], cost[2], cost[3], cost[4] }
            out[i] = lim[i]
        end
    end
    return out or cost -- (callers only read it)
end

-- QuotaPolicy's scopeAllows: one scope's window and day.
local function scopeAllows(sc, b, l, cost, how, t, d)
    local wl = limitsOfBudget(l, b)
    local at = t
    local requestsFull = false
    if anyLimit(wl) then
        local c = cost
        c = capped(cost, wl, how)
        local ur, uk, ui, uo = usage(sc, t)
        at = math.max(at, whenFits(sc, t, c, wl, ur, uk, ui, uo))
        requestsFull = wl[1] >= 0 and ur + 1 > wl[1] -- one more request would not fit
    end
    local dl = limitsOfBudget(l, b.d)
    if anyLimit(dl) and (sc.dy or sc.cu) then
        local c = cost
        c = capped(cost, dl, how)
        local ur, uk, ui, uo = dayUsage(sc, l, t)
        local dayAt
        if sc.dy then
            dayAt = whenFits(sc.dy, t, c, dl)
        elseif fitsUnder(ur, uk, ui, uo, c, dl) then
            dayAt = t
        elseif fitsUnder(0, 0, 0, 0, c, dl) then
            local _, dayEnd = dayOf(l, t)
            dayAt = dayEnd
        else
            dayAt = NEVER
        end
        if dayAt > t and dl[1] >= 0 and ur + 1 > dl[1] then
            requestsFull = true
        end
        at = math.max(at, dayAt)
    end
    if at <= t then return true end
    if requestsFull then d.reason = R_WINDOW else d.reason = R_TOKENS end
    d.retryAt = at
    return false
end

-- LimitLearning::scopeOf: the first class, by name, the model is in ('' none).
local function scopeOf(l, model)
    for _, m in ipairs(sortedKeys(l.m or {})) do
        if classMatches(m, l.m[m], model) then return m end
    end
    return ''
end
-- QuotaPolicy::remainderApplies: the provider's stated remainder is in force for this model
-- (its scope is the provider, or the model's scope).
local function remainderApplies(p, l, model, t)
    if not p.qu or t >= p.qu then return false end
    return p.qs == '' or scopeOf(l, model) == p.qs
end

local function evaluate(g, p, l, r, ticket, t)
    local d = { admitted = false, reason = 0, retryAt = NEVER, fence = 0, ticket = ticket, slotTaken = false }
    if g.pz or p.pz then
        d.reason = R_PAUSED
        return d
    end
    local be = backoffUntil(p, t)
    if t < be then
        d.reason = R_BACKOFF
        d.retryAt = be
        return d
    end
    if p.q ~= '' then
        local h = W.head(p, t, ticket)
        if h and W.at(p, h) ~= ticket then
            d.reason = R_QUEUE
            return d
        end
    end
    local paceEnd = math.min(p.pu, plus(be, l.w))
    if t < paceEnd and l.r then
        local spacing = math.floor(l.w / effective(l, l.r))
        local ended = paceEnd - l.w
        local lastAdmit = math.min(p.la, t)
        if lastAdmit >= ended and t < lastAdmit + spacing then
            d.reason = R_BACKOFF
            d.retryAt = lastAdmit + spacing
            return d
        end
    end
    if p.qu and p.ql <= 0 and remainderApplies(p, l, r.model, t) then
        d.reason = R_BACKOFF
        if #p.sl == 0 then d.retryAt = math.min(p.qu, plus(t, MAX_STOP_MS)) end
        return d
    end
    local cost = costOf(r)
    for _, sc in ipairs(p.sc) do
        local b = budgetsOf(l, sc.m)
        if b and (sc.m == '' or classMatches(sc.m, b, r.model)) and not scopeAllows(sc, b, l, cost, capOf(r), t, d) then
            return d
        end
    end
    if r.slot and l.par and #p.sl >= l.par then
        d.reason = R_SLOTS
        for _, s in ipairs(p.sl) do
            if s.pid == 0 then d.retryAt = math.min(d.retryAt, placeholderEnd(s, l)) end
        end
        return d
    end
    d.admitted = true
    return d
end

-- me: the caller's queue entry (ticket's), when it has one.
local function admitApply(g, p, l, r, ticket, t, enqueue, me)
    local d = evaluate(g, p, l, r, ticket, t)
    if not d.admitted then
        if ticket ~= 0 then
            if me and me.r ~= d.reason then
                me.r = d.reason
                W.changed(me)
            end
        elseif enqueue then
            if W.n(p) >= MAX_WAITERS then
                return nil, 'too many callers are already waiting for provider \'' .. p.n .. '\''
            end
            local wpid = r.pid
            if r.wpid > 0 then wpid = r.wpid end
            -- The deadline comes as the time the caller had left by its own clock: placed on the
            -- server's, as every time the queue is judged by (a caller whose clock is behind
            -- must not be taken for a ghost past its deadline and lose its place).
            local deadline = plus(t, clamp(r.deadlineIn or 0, -NEVER, NEVER))
            local w = { tk = g.nt, pid = wpid, e = t, d = deadline, n = r.tokens, c = r.caller, m = r.model,
                s = r.slot, r = d.reason, h = myHost, st = r.wst, lu = t + WAITER_LEASE_MS, rid = r.rid, sn = t }
            if W.validKey(r.wake) then w.wk = r.wake end
            -- (QuotaPolicy::admit's Waiter::holds and the rest, for W.handOff; defaults left out.)
            if r.slot and r.ho then
                w.hd = true
                if r.pid ~= wpid then w.hp, w.hst = r.pid, r.st end
                if r.est then w.x = true end
                local ein, eout = clamp(r['in'] or 0, 0, MAX_BUCKET_COUNT), clamp(r.out or 0, 0, MAX_BUCKET_COUNT)
                if ein > 0 then w.i = ein end
                if eout > 0 then w.o = eout end
                local ls = clamp(r.lease, 0, NEVER)
                if ls > 0 then w.ls = ls end
            end
            g.nt = g.nt + 1
            dirty['g'] = g
            W.rec[w.tk] = w
            W.changed(w)
            W.append(p, w.tk)
            d.ticket = w.tk
        end
        return d
    end
    -- Recorded whole, also an estimate above a limit (only its check was capped), in the
    -- scopes of the classes the model counts in, made now if new.
    local cost = costOf(r)
    for _, m in ipairs(sortedKeys(l.m)) do
        if classMatches(m, l.m[m], r.model) then ensureScope(p, l, m, t) end
    end
    for _, sc in ipairs(p.sc) do
        local b = budgetsOf(l, sc.m)
        if b and (sc.m == '' or classMatches(sc.m, b, r.model)) then
            record(sc, t, cost[1], cost[2], cost[3], cost[4])
            if sc.dy then record(sc.dy, t, cost[1], cost[2], cost[3], cost[4]) end
            if sc.cu then
                local start = dayOf(l, t)
                if sc.cs ~= start then
                    sc.cs = start
                    sc.cu = { 0, 0, 0, 0 }
                end
                addDay(sc, cost[1], cost[2], cost[3], cost[4])
            end
        end
    end
    d.fence = g.nf
    g.nf = g.nf + 1
    dirty['g'] = g
    if r.slot and l.par then
        local lease = l.mh
        if r.lease > 0 then lease = r.lease end
        local slot = { f = d.fence, pid = r.pid, a = t, n = r.tokens, c = r.caller, m = r.model, h = myHost,
            st = r.st, lu = plus(t, lease), ll = lease, rid = r.rid }
        -- The estimate's split (Slot::inputTokens / outputTokens), only when there is one.
        local ein, eout = clamp(r['in'] or 0, 0, MAX_BUCKET_COUNT), clamp(r.out or 0, 0, MAX_BUCKET_COUNT)
        if ein > 0 or eout > 0 then slot.ei, slot.eo = ein, eout end
        p.sl[#p.sl + 1] = slot
        d.slotTaken = true
    end
    if ticket ~= 0 then dequeue(p, ticket) end
    if remainderApplies(p, l, r.model, t) then p.ql = math.max(0, p.ql - 1) end
    p.la = t
    p.at = p.at + 1
    return d
end

-- Hand-off (QuotaPolicy::handOff): a slot given back goes straight to the first in line when
-- it takes a handed slot (hd), waits on the releaser's own host (hh: where its holder is probed
-- by its host-mates, not judged by a lease; a head of another host that falls silent must still
-- be passed within HEAD_GRACE), listens on its channel, before its deadline, and can go now:
-- admitted here as its own look would admit it (admitApply with its ticket, its request as it
-- queued it). The slot keeps its ticket (tk) and the waiter's host; the waiter finds it by its
-- ticket and pid when it looks (ops.admit), and its ring carries the admission
-- ('a:<ticket>:<fence>:<lease>:<now>', published once the state is written: W.permits), so it
-- needs no call of its own: one call fewer per queued admission. A head whose channel has no
-- subscriber (its process or connection gone since it last looked; a release probes nobody)
-- is handed nothing: it is rung as before, and passed when that reaches nobody; so is every
-- head where the user may not count a channel's subscribers (PUBSUB NUMSUB), and every head
-- without a channel.
W.permits = {}
W.handReq = {}
-- An admission's history line (an admit's own, or one a release made: W.handOff). The line
-- leaves out empty and zero fields: they are not set.
function W.admitEvent(provider, caller, pid, fence, model, tokens, waited, reason)
    local e = event(EVENT.ADMIT, provider)
    e.caller = caller
    e.pid = pid
    e.fence = fence
    if model ~= '' then e.model = model end
    if tokens ~= 0 then e.tokens = tokens end
    if waited ~= 0 then e.waited_ms = waited end
    if reason ~= '' then e.reason = reason end
end
function W.handOff(p, l)
    if p.q == '' or type(l) ~= 'table' or not l.par then return end
    if pruneQueueHead(p, now) then touch(p) end
    if p.q == '' then return end
    -- The first in line, as QuotaPolicy::handOff takes the queue's front (its own ticket is
    -- never passed: its look would be admitted now if admitApply admits it here).
    local w = W.get(W.at(p, 1))
    -- (The releaser's host comes as hh, not host: a release judges holders and waiters as
    -- of no host, as it always did; only the hand-off asks where the head waits.)
    -- Only a head that listens on its channel (wk: checked below to have a subscriber): a
    -- release probes nobody, so a head with none could be dead and would keep the slot.
    if w.lost or not w.hd or not w.s or not w.wk or now > w.d or not a.hh or a.hh == '' or w.h ~= a.hh then
        return
    end
    -- Limits with a calendar day: handed only where the releaser's client gave that day (it
    -- read the zone). Else the head, rung, looks itself, and ops.admit asks for the day: a
    -- zone nobody can read admits nobody this way either, and the release itself goes on.
    if l.dz and not (daySpans and daySpans[l.dz]) then return end
    local r = W.emptied(W.handReq)
    W.handReq = r
    r.provider, r.caller, r.model, r.tokens = p.n, w.c, w.m, w.n
    r['in'], r.out, r.est, r.slot = w.i or 0, w.o or 0, w.x or false, true
    r.pid, r.wpid, r.st, r.wst, r.lease, r.rid, r.deadlineIn = w.hp or w.pid, w.pid, w.hst or w.st, w.st, w.ls or 0, w.rid, 0
    r.ho = true
    local ch = channel .. 'w:' .. w.wk
    if redis.acl_check_cmd and not redis.acl_check_cmd('PUBSUB', 'NUMSUB', ch) then return end
    local n = redis.pcall('PUBSUB', 'NUMSUB', ch)
    if type(n) ~= 'table' or tonumber(n[2]) == nil or tonumber(n[2]) < 1 then return end
    W.checkAside() -- the ring comes after the state is written: nothing may refuse the call then
    -- Refused, it changes nothing (no record of its own is passed: its reason stays).
    local d = admitApply(global(), p, l, r, w.tk, now, false, nil)
    if not d or not d.admitted or not d.slotTaken then return end
    local s = p.sl[#p.sl]
    s.tk, s.h = w.tk, w.h
    W.admitEvent(p.n, w.c, r.pid, d.fence, w.m, w.n, now - w.e, 'slots')
    W.permits[#W.permits + 1] = { ch, string.format('a:%d:%d:%d:%d', w.tk, d.fence, s.ll, now) }
    touch(p)
    ring = true
end
-- The slot a release handed to the waiter of this ticket for this holder pid (W.handOff),
-- while it is held (the pid too: a ticket issued again after a lost state must not find another's).
function W.handed(p, ticket, pid)
    if ticket == 0 then return nil end
    for i, s in ipairs(p.sl) do
        if s.tk == ticket and s.pid == pid then return s, i end
    end
    return nil
end

local function backoffFor(l, consecutive, ra)
    local cap = clamp(l.bc, 1, MAX_BACKOFF_MS)
    local e = clamp(l.bb, 1, cap)
    local i = 1
    while i < consecutive and e < cap do
        e = e * 2
        i = i + 1
    end
    e = math.min(e, cap)
    if ra >= 0 then return clamp(ra, 0, MAX_BACKOFF_MS) end -- the provider's own time: exactly that
    return e
end

-- Commit ---------------------------------------------------------------------------------------

-- One line of history.jsonl. Built here rather than by cjson.encode, which writes numbers
-- with 14 significant digits: fences (from the server clock in µs) have 16. Strings are
-- encoded by cjson; empty and zero fields are left out, as HistoryEvent::toJsonLine does.
local EVENT_KEYS = { 't', 'type', 'provider', 'caller', 'model', 'pid', 'tokens', 'fence', 'waited_ms', 'reason',
    'retry_after_ms', 'backoff_ms' }
local function eventLine(e)
    local parts = {}
    for _, k in ipairs(EVENT_KEYS) do
        local v = e[k]
        if type(v) == 'number' and (v ~= 0 or k == 't') then
            parts[#parts + 1] = '"' .. k .. '":' .. string.format('%d', v)
        elseif type(v) == 'string' and v ~= '' then
            parts[#parts + 1] = '"' .. k .. '":' .. cjson.encode(v)
        end
    end
    return '{' .. table.concat(parts, ',') .. '}'
end

-- Wake-ups: after an operation that may have freed capacity (ring), the head of each queue it
-- touched, and only it (the queue is FIFO: nobody else could go). A head whose wake-up reaches
-- no subscriber is passed (nr) and the next one rung, a few per call. A head's turn starts
-- (hs) when it is first found at the head. Its watcher (the next waiter) is rung once per
-- head (p.wt), and then looks whenever the head would go stale: a head may die where no
-- ring will find it out (waiting for time, or for slots held by the dead; with its host, its
-- connection still open), and only a look can probe it (this host) or pass it (another).
-- A ring's message says when to look: '1' now, 'in:<ms>' within that many ms unless rung again
-- (RedisQuotaBackend::changeMark). A head that cannot go yet (every slot it needs is held, or
-- the provider is paused) and a watcher are told when to look rather than made to look now:
-- in a crowd those looks were two of an admission's six calls. (A client from before this
-- treats any message as "now": it looks more often, and is judged the same.)
W.MAX_PASSES = 8
function W.publish(name, message)
    W.checkAside()
    local r = redis.pcall('PUBLISH', channel .. name, message or '1')
    if type(r) == 'table' and r.err then
        afterCommit[#afterCommit + 1] = 'waiters not woken on ' .. channel .. name .. ': ' .. r.err
        return -1
    end
    return r
end
function W.wake(p)
    local h
    local passes = 0
    while true do
        h = W.head(p, now, callerTicket)
        if not h then return end
        local w = W.get(W.at(p, h))
        local told = ring
        if not w.hs then
            w.hs = now
            W.changed(w)
            told = true
        end
        if not told or w.tk == callerTicket or not w.wk or passes >= W.MAX_PASSES then break end
        if W.publish('w:' .. w.wk, W.blocked(p, w) and ('in:' .. HEAD_LOOK_MS) or '1') ~= 0 then break end
        w.nr = now
        W.changed(w)
        passes = passes + 1
    end
    local wi = W.watcher(p, h, now)
    if not wi then return end
    local x = W.get(W.at(p, wi))
    if p.wt == x.tk then return end
    p.wt = x.tk
    touch(p)
    if x.tk ~= callerTicket and x.wk then W.publish('w:' .. x.wk, 'in:' .. W.watchIn(W.get(W.at(p, h)))) end
end

-- The ghosts this call met (W.get) leave their queues: their waiters, alive, queue again.
function W.purge(p)
    local kept = {}
    for i = 1, W.n(p) do
        local tk = W.at(p, i)
        local w = W.rec[tk]
        if w and w.lost then
            local e = event(EVENT.GAVE_UP, p.n)
            e.reason = w.lost
            if tk >= 1 then W.drop(tk) end
        else
            kept[#kept + 1] = tk
        end
    end
    if #kept ~= W.n(p) then
        p.q = W.join(kept)
        touch(p)
    end
end
-- A command over many fields, in parts (unpack is bounded by Lua's C stack).
function W.inParts(cmd, key, args, step)
    for i = 1, #args, step do
        redis.call(cmd, key, unpack(args, i, math.min(i + step - 1, #args)))
    end
end

local function commit()
    for name, p in pairs(providerStates) do
        if W.ghosts then W.purge(p) end
        -- Who is at the head changes by a ring, by the queue changing, or by time (a head gone
        -- stale): the last is what a waiter's look (admit) is for. Any other call that neither
        -- rang nor changed the queue leaves the head and its watcher as the call before woke
        -- them (reading them cost a release's 'success' a third of its time in a crowd).
        if p.q ~= '' and (ring or op == 'admit' or W.read[name] ~= p.q) then W.wake(p) end
    end
    local args, gone = {}, {}
    for field, v in pairs(dirty) do
        if not W.gone[field] then
            local raw
            if v.sc ~= nil then -- a provider ('p:'), not the globals or a waiter ('q:')
                if v.hw == nil or v.hw < now then v.hw = now end
            end
            raw = cmsgpack.pack(v)
            args[#args + 1] = field
            args[#args + 1] = raw
            keepDecoded(field, raw, v)
        end
    end
    for field, r in pairs(readThisCall) do
        if dirty[field] == nil and not W.gone[field] then keepDecoded(field, r.raw, r.v) end
    end
    for field in pairs(W.gone) do gone[#gone + 1] = field end
    if lostNote then
        args[#args + 1] = LOST_FIELD
        args[#args + 1] = lostNote
    end
    -- The state is the commit point: once it is written the operation happened. What follows
    -- it (the history, the wake-ups) was checked by preflight() but may still fail (a stream
    -- whose last id is the largest there is): reported as a warning with the reply, never as a
    -- failure of an operation that took place. (Its fields in parts: a call after a stall may
    -- write every waiter of every provider.)
    W.inParts('HSET', KEYS[2], args, 2000)
    W.inParts('HDEL', KEYS[2], gone, 2000)
    for _, m in ipairs(W.permits) do
        local r = redis.pcall('PUBLISH', m[1], m[2])
        if type(r) == 'table' and r.err then
            afterCommit[#afterCommit + 1] = 'a handed slot not announced on ' .. m[1] .. ': ' .. r.err
        end
    end
    local lost = 0
    local why
    for _, e in ipairs(events) do
        local r = redis.pcall('XADD', KEYS[3], 'MAXLEN', '~', historyCap, '*', 'e', eventLine(e))
        if type(r) == 'table' and r.err then
            lost = lost + 1
            why = r.err
        end
    end
    if lost > 0 then
        afterCommit[#afterCommit + 1] = lost .. ' history event(s) not written to ' .. KEYS[3] .. ': ' .. why
    end
    local function wake(name)
        local r = redis.pcall('PUBLISH', channel .. name, '1')
        if type(r) == 'table' and r.err then
            afterCommit[#afterCommit + 1] = 'waiters not woken on ' .. channel .. name .. ': ' .. r.err
        end
    end
    if #args > 0 or #events > 0 then wake('changed') end
end

local function unknownProvider(provider)
    return cmsgpack.pack({ err = 'unknown', msg = provider, known = knownProviders() })
end

-- The limits of a provider the operation needs, or the refusal to return: limits that do not
-- parse, or an unknown provider.
local function knownLimits(provider)
    local l, bad = limitsOf(provider)
    if bad then return nil, refuse('corrupt', bad) end
    if not l then return nil, unknownProvider(provider) end
    return l
end

local function markHome()
    if redis.call('EXISTS', KEYS[4]) == 0 then
        redis.call('SET', KEYS[4], cjson.encode({ created = now, format = HOME_FORMAT }))
    end
end

-- Operations -----------------------------------------------------------------------------------

local ops = {}

function ops.admit()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    -- A calendar day in the limits is asked for even where no per-day limit counts in it: a
    -- zone the client cannot read is then refused there (learnDay), as every reader of these
    -- limits refuses it, and nothing is admitted under limits the client calls corrupt.
    if l.dz then dayOf(l, now) end
    local why = impossible(l, a)
    if why then return refuse('usage', 'this request can never be admitted: it ' .. why) end
    local g = global()
    local p = providerOf(a.provider, l)
    local changed = false
    if syncProvider(p, l, now) then changed = true end
    if boundTimes(g, p, l, now) then changed = true end
    if reclaimVanished(p, now) > 0 then
        changed = true
        ring = true
    end
    if pruneQueueHead(p, now) then
        changed = true
        ring = true
    end
    local lease = l.mh
    if a.lease > 0 then lease = a.lease end
    local handed = W.handed(p, a.ticket, a.pid)
    if handed then
        -- A release handed us its slot while we waited (W.handOff): ours.
        if changed then touch(p) end
        commit()
        return reply({ lease = lease, now = now, admitted = true, fence = handed.f, ticket = a.ticket, slotTaken = true })
    end
    local ticket = a.ticket
    local me = W.find(p, ticket)
    if not me then ticket = 0 end -- not queued, or judged a ghost while we lived: queue again
    if me and renewWaiter(me, now) then changed = true end
    if me and W.saw(me, now, a.wake) then changed = true end
    local d, err = admitApply(g, p, l, a, ticket, now, a.enqueue, me)
    if not d then return refuse('busy', err) end
    if not d.admitted and d.reason == R_SLOTS and a.slot then
        if reclaimSlots(p, l, now, false, '') > 0 then
            changed = true
            d, err = admitApply(g, p, l, a, d.ticket, now, a.enqueue, W.find(p, d.ticket))
            if not d then return refuse('busy', err) end
        end
    end
    -- Who the caller should look at: holders and the head waiter of its own host, which only
    -- it can probe (it calls again naming the dead ones).
    local suspects = {}
    if not d.admitted and d.reason == R_SLOTS then
        for _, s in ipairs(p.sl) do
            if s.pid ~= 0 and s.h == myHost and not deadF[s.f] then
                suspects[#suspects + 1] = { k = 's', id = s.f, pid = s.pid, st = s.st }
            end
        end
    elseif not d.admitted and d.reason == R_QUEUE and p.q ~= '' then
        local w = W.get(W.at(p, W.head(p, now, d.ticket) or 1))
        if w.h == myHost and not deadT[w.tk] and not w.lost then
            suspects[#suspects + 1] = { k = 'w', id = w.tk, pid = w.pid, st = w.st }
        end
    end
    if d.admitted then
        W.admitEvent(a.provider, a.caller, a.pid, d.fence, a.model, a.tokens, a.waited, a.first)
        changed = true
        ring = ring or p.q ~= ''
    elseif d.ticket ~= ticket then
        changed = true -- newly queued
    end
    -- When this waiter looks again at the latest (lookIn): the head soon (the watcher judges it
    -- by its looks), the watcher when the head would go stale, the rest every QUEUE_LOOK_MS.
    local lookIn = -1
    if not d.admitted and d.ticket ~= 0 then
        callerTicket = d.ticket
        lookIn = QUEUE_LOOK_MS
        local h = W.head(p, now, d.ticket)
        if h and W.at(p, h) == d.ticket then
            lookIn = HEAD_LOOK_MS
        elseif h then
            local wi = W.watcher(p, h, now)
            if wi and W.at(p, wi) == d.ticket then
                lookIn = W.watchIn(W.get(W.at(p, h)))
                if p.wt ~= d.ticket then
                    p.wt = d.ticket
                    changed = true
                end
            end
        end
    end
    if changed then touch(p) end
    commit()
    -- Fields at their defaults are left out (the client reads a missing one as its default:
    -- false, 0, -1 for retryAt and lookIn, no suspects): every call is one of these.
    local out = { lease = lease, now = now }
    if d.admitted then out.admitted = true end
    if d.reason ~= 0 then out.reason = d.reason end
    if d.retryAt < NEVER then out.retryAt = d.retryAt end
    if d.fence ~= 0 then out.fence = d.fence end
    if d.ticket ~= 0 then out.ticket = d.ticket end
    if d.slotTaken then out.slotTaken = true end
    if #suspects > 0 then out.suspects = suspects end
    if lookIn ~= -1 then out.lookIn = lookIn end
    return reply(out)
end

function ops.leave()
    local l = limitsOf(a.provider)
    local raw = redis.call('HEXISTS', KEYS[2], 'p:' .. a.provider)
    if l and raw == 1 then
        local p = providerOf(a.provider, l)
        if dequeue(p, a.ticket) then
            touch(p)
            ring = true
        else
            local s, i = W.handed(p, a.ticket, a.pid)
            if s then
                -- It gave up after a release handed it a slot it never learned of: given back,
                -- and on to the next in line.
                local e = event(EVENT.RELEASE, a.provider)
                e.caller = s.c
                e.model = s.m
                e.pid = s.pid
                e.fence = s.f
                e.reason = 'given back: its waiter gave up before it learned of it'
                table.remove(p.sl, i)
                touch(p)
                ring = true
                W.handOff(p, l)
            end
        end
    end
    if a.gaveUp then
        local e = event(EVENT.GAVE_UP, a.provider)
        e.caller = a.caller
        e.model = a.model
        e.pid = a.pid
        e.tokens = a.tokens
        e.waited_ms = a.waited
        e.reason = a.why
    end
    commit()
    return reply({})
end

function ops.report429()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    local g = global()
    local p = providerOf(a.provider, l)
    syncProvider(p, l, now)
    boundTimes(g, p, l, now)
    local ra = a.ra
    -- QuotaPolicy::sameStorm / backoffOf429: a 429 heard during a backoff answers a call admitted
    -- before it began, and never escalates; a named time is waited exactly.
    local same = backoffUntil(p, now) > now
    p.c = clamp(p.c, 0, MAX_CONSECUTIVE_429)
    local backoff
    if ra >= 0 then
        backoff = clamp(ra, 0, MAX_BACKOFF_MS)
    elseif same then
        backoff = 0
    else
        backoff = backoffFor(l, math.min(p.c + 1, MAX_CONSECUTIVE_429), -1)
    end
    -- Jitter: up to 10% of the backoff (at most 5 s), from the caller's draw.
    local span = math.min(math.floor(backoff / 10), MAX_JITTER_MS)
    local jitter = 0
    if span > 0 then jitter = a.draw % (span + 1) end
    if not same then p.c = math.min(p.c + 1, MAX_CONSECUTIVE_429) end
    p.bu = math.max(backoffUntil(p, now), plus(now, plus(backoff, clamp(jitter, 0, MAX_JITTER_MS))))
    p.pu = plus(math.max(p.bu, now), l.w)
    p.l4 = now
    p.rt = p.rt + 1
    local e = event(EVENT.RATE_LIMITED, a.provider)
    e.caller = a.caller
    e.pid = a.pid
    e.retry_after_ms = clamp(ra, 0, MAX_BACKOFF_MS)
    e.backoff_ms = p.bu - now
    if same then
        e.reason = 'same storm, ' .. p.c .. ' consecutive'
    else
        e.reason = p.c .. ' consecutive'
    end
    touch(p)
    commit()
    return reply({ backoff = backoff })
end

function ops.success()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    local p = providerOf(a.provider, l)
    if p.c ~= 0 then
        p.c = 0
        touch(p)
    end
    local e = event(EVENT.OK, a.provider)
    e.caller = a.caller
    commit()
    return reply({})
end

-- Limits set for a provider without a state while the home's last loss is recent (within the
-- time its placeholders would hold): it lost them too, and starts conservatively.
local function recentlyLost(l)
    local at = lostAt()
    return at > 0 and now - at < math.max(l.mh or DEFAULT_MAX_HOLD_MS, RENEWED_LEASE_MS, l.w or 0)
end

function ops.setLimits()
    local current = redis.call('HGET', KEYS[1], a.provider)
    if a.expect == 1 and current then return reply({ set = false, found = current }) end
    if a.expect == 2 and current ~= a.expected then return reply({ set = false, found = current or false }) end
    if not current and #redis.call('HKEYS', KEYS[1]) >= MAX_PROVIDERS then
        return refuse('usage', 'at most ' .. MAX_PROVIDERS .. ' providers')
    end
    local l = cjson.decode(a.limits)
    local field = 'p:' .. a.provider
    local p
    if current or redis.call('HEXISTS', KEYS[2], field) == 1 then
        p = providerOf(a.provider, l)
    elseif recentlyLost(l) then
        p = restartConservatively(a.provider, l, 'limits set after this home lost its data: windows start full, '
            .. 'slots held until their holders renew')
    else
        p = newProvider(a.provider) -- a new provider starts empty
        if serverClock then p.sv = now end
        providerStates[a.provider] = p
    end
    syncProvider(p, l, now)
    touch(p)
    redis.call('HSET', KEYS[1], a.provider, a.limits)
    markHome()
    local e = event(EVENT.LIMITS, a.provider)
    e.reason = a.reason
    commit()
    return reply({ set = true, found = current or false })
end

function ops.removeLimits()
    if redis.call('HEXISTS', KEYS[1], a.provider) == 0 then return unknownProvider(a.provider) end
    redis.call('HDEL', KEYS[1], a.provider)
    W.deleteProvider(a.provider)
    local e = event(EVENT.LIMITS, a.provider)
    e.reason = byWhom('removed', a.who)
    commit()
    return reply({})
end

function ops.importLimits()
    local incoming = {}
    for i, name in ipairs(a.names) do incoming[name] = a.values[i] end
    local changedNames = {}
    local existing = redis.call('HKEYS', KEYS[1])
    table.sort(existing)
    local count = #existing
    local removed = {}
    if a.replace then
        for _, name in ipairs(existing) do
            if incoming[name] == nil then
                removed[#removed + 1] = name
                count = count - 1
            end
        end
    end
    for i, name in ipairs(a.names) do
        local current = redis.call('HGET', KEYS[1], name)
        if current ~= a.values[i] then
            if not current then count = count + 1 end
            if count > MAX_PROVIDERS then return refuse('usage', 'at most ' .. MAX_PROVIDERS .. ' providers') end
        end
    end
    -- Refused above before anything is removed: a refused import changes nothing.
    for _, name in ipairs(removed) do
        redis.call('HDEL', KEYS[1], name)
        W.deleteProvider(name)
        local e = event(EVENT.LIMITS, name)
        e.reason = byWhom('removed by an import', a.who)
        changedNames[#changedNames + 1] = name
    end
    for i, name in ipairs(a.names) do
        local value = a.values[i]
        local current = redis.call('HGET', KEYS[1], name)
        if current ~= value then
            local l = cjson.decode(value)
            local p
            if current or redis.call('HEXISTS', KEYS[2], 'p:' .. name) == 1 then
                p = providerOf(name, l)
            elseif a.fresh and not recentlyLost(l) then
                -- The user says this quota is used nowhere else (a new home): it starts empty.
                p = newProvider(name)
                if serverClock then p.sv = now end
                dirty['p:' .. name] = p
                providerStates[name] = p
            else
                -- A restore, or the limits of a quota used elsewhere: what was spent is not known.
                -- Nor after a loss this home has seen, --fresh or not: its holders still run
                -- (a setup script run again after a flush must not give their slots away).
                local why = 'imported without a state (a restore)'
                if a.fresh then why = 'imported with --fresh after this home lost its data (not a new home)' end
                p = restartConservatively(name, l, why .. ': windows start full, slots held until their holders renew')
            end
            syncProvider(p, l, now)
            touch(p)
            redis.call('HSET', KEYS[1], name, value)
            local e = event(EVENT.LIMITS, name)
            if current then
                e.reason = byWhom('changed by an import', a.who)
            else
                e.reason = byWhom('added by an import', a.who)
            end
            changedNames[#changedNames + 1] = name
        end
    end
    if #a.names > 0 then markHome() end
    commit()
    return reply({ changed = changedNames })
end

function ops.pause()
    local g = global()
    if a.provider == '' then
        g.pz = true
        g.pr = a.stored
        g.pat = now
        dirty['g'] = g
    else
        local l, refusal = knownLimits(a.provider)
        if refusal then return refusal end
        local p = providerOf(a.provider, l)
        p.pz = true
        p.pr = a.stored
        p.pa = now
        touch(p)
    end
    local e = event(EVENT.PAUSE, a.provider)
    e.reason = a.reason
    commit()
    return reply({})
end

function ops.resume()
    local g = global()
    if a.provider == '' then
        g.pz = false
        g.pr = ''
        dirty['g'] = g
        for _, name in ipairs(knownProviders()) do
            local l = limitsOf(name)
            if l and redis.call('HEXISTS', KEYS[2], 'p:' .. name) == 1 then
                local p = providerOf(name, l)
                if p.pz or p.pr ~= '' then
                    p.pz = false
                    p.pr = ''
                    touch(p)
                end
            end
        end
    else
        local l, refusal = knownLimits(a.provider)
        if refusal then return refusal end
        local p = providerOf(a.provider, l)
        p.pz = false
        p.pr = ''
        touch(p)
    end
    local e = event(EVENT.RESUME, a.provider)
    e.reason = a.reason
    ring = true
    commit()
    return reply({})
end

function ops.resetBackoff()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    local p = providerOf(a.provider, l)
    p.bu = 0
    p.pu = 0
    p.c = 0
    p.qu, p.ql, p.qs = nil, nil, nil -- the user's word overrides the provider's last one
    touch(p)
    local e = event(EVENT.BACKOFF_RESET, a.provider)
    e.reason = a.reason
    ring = true
    commit()
    return reply({})
end

-- QuotaPolicy::applyRemaining: the latest word replaces the one kept; no history event.
function ops.remaining()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    local p = providerOf(a.provider, l)
    -- The reset comes as a distance from the client's now (its clock may be off): placed on ours.
    local untilMs = math.min(plus(now, clamp(a.untilIn or 0, -NEVER, NEVER)), plus(now, MAX_STOP_MS))
    -- What was admitted after the answered request's fence, the word may not count.
    local g = global()
    local since = 0
    local fence = a.fence or 0
    if fence > 0 and g.nf - 1 > fence then since = math.min(g.nf - 1 - fence, MAX_REPORTED) end
    local left = clamp(a.left - since, 0, MAX_REPORTED)
    local scope = scopeOf(l, a.model)
    if untilMs > now and (p.ql ~= left or p.qu ~= untilMs or p.qs ~= scope) then
        p.ql, p.qu, p.qs = left, untilMs, scope
        touch(p)
        ring = left > 0 -- waiters held by the word before may go now
    elseif untilMs <= now and p.qu and p.qu > now then
        -- A reset already past: the budget has refilled since, so the word kept binds no more.
        p.ql, p.qu, p.qs = nil, nil, nil
        touch(p)
        ring = true
    end
    commit()
    return reply({})
end

function ops.hold()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    local p = providerOf(a.provider, l)
    -- The end comes as a distance from the client's now (its clock may be off): placed on ours.
    local untilMs = math.min(plus(now, clamp(a.untilIn or 0, -NEVER, NEVER)), plus(now, MAX_STOP_MS))
    -- QuotaPolicy::applyHold: then the window's even pace for one window; a history event when
    -- the hold starts or moves the end in force on by more than HOLD_NOTE_MS.
    local inForce = backoffUntil(p, now)
    if untilMs > inForce then
        p.bu = untilMs
        p.pu = math.max(p.pu, plus(untilMs, l.w))
        -- QuotaPolicy::applyHold: one request for the window after it, until an answer says more.
        p.ql, p.qu, p.qs = 1, plus(untilMs, math.min(l.w, POST_HOLD_MS)), ''
        touch(p)
        if inForce <= now or untilMs - inForce > HOLD_NOTE_MS then
            local e = event(EVENT.HOLD, a.provider)
            e.reason = a.reason
        end
    end
    commit()
    return reply({})
end

-- LimitMismatch::differs, exactly in doubles: reported × w = given × 60000 holds only when
-- given = q·w' and reported = q·m' for the same q (w' = w/g, m' = 60000/g, g = gcd(w, 60000));
-- every quotient stays below 2^41, where the products would not.
local function limitDiffers(reported, given, w)
    if reported < 0 then return false end
    if not given then return true end
    local x, y = w, MINUTE_MS
    while y ~= 0 do x, y = y, x % y end
    local wq, mq = w / x, MINUTE_MS / x
    return not (given % wq == 0 and reported % mq == 0 and given / wq == reported / mq)
end
-- LimitMismatch::describe (the same words)
local NO_LIMIT = { requests = 'request', tokens = 'token', ['input tokens'] = 'input-token',
    ['output tokens'] = 'output-token' }
local function limitNotice(budget, reported, given, w, scope)
    local out = 'provider reports ' .. string.format('%d', reported) .. ' ' .. budget .. '/min'
    if scope ~= '' then out = out .. ' for class ' .. scope end
    out = out .. '; '
    if not given then
        return out .. 'Tollgate sets no ' .. NO_LIMIT[budget] .. ' limit'
    end
    out = out .. 'Tollgate is set to ' .. string.format('%d', given)
    if w ~= MINUTE_MS then
        if w % 1000 == 0 then
            out = out .. ' per ' .. string.format('%d', w / 1000) .. ' s'
        else
            out = out .. ' per ' .. string.format('%d', w) .. ' ms'
        end
    end
    return out
end

-- LocalQuotaBackend::noteReportedLimits (and LimitMismatch::find for the figures noted)
function ops.noteLimits()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    local p = providerOf(a.provider, l)
    local was = { p.rr or -1, p.rk or -1, p.ri or -1, p.ro or -1 }
    local wasScope, keptAt = p.rs or '', p.ra or 0
    local given = { a.requests, a.tokens, a.input, a.output }
    local next, any = {}, false
    for i = 1, 4 do
        next[i] = was[i]
        if given[i] >= 0 then
            next[i] = math.min(given[i], MAX_REPORTED)
            any = true
        end
    end
    local scope = wasScope
    if any then scope = a.scope end
    local pl = a.plan
    -- What the client sent is checked as the state is (validProvider): a value the state could
    -- not hold fails the call, nothing written.
    if type(scope) ~= 'string' or #scope > 64 or (pl ~= nil and (type(pl) ~= 'table' or not isInt(pl.s, 0, 3)
        or not isInt(pl.f, -1, MAX_PERMILLE) or not isInt(pl.fr, 0, NEVER) or not isInt(pl.v, -1, MAX_PERMILLE)
        or not isInt(pl.vr, 0, NEVER))) then
        return refuse('usage', 'the reported limits or plan usage are out of range')
    end
    local same = scope == wasScope
    for i = 1, 4 do
        if next[i] ~= was[i] then same = false end
    end
    if pl and not (p.pl and p.pl.s == pl.s and p.pl.f == pl.f and p.pl.fr == pl.fr and p.pl.v == pl.v
        and p.pl.vr == pl.vr) then
        same = false
    end
    if same and keptAt <= now and now - keptAt < REPORT_REFRESH_MS then
        return reply({ written = false })
    end
    -- The scope's limits: a class's (none when the class is gone), or the provider's.
    local sl, w = l, l.w
    if scope ~= '' then
        sl = l.m and l.m[scope]
        if sl then w = sl.w end
    end
    if sl then
        local keys = { 'r', 't', 'it', 'ot' }
        local learnedKeys = { 'requests', 'tokens', 'input_tokens', 'output_tokens' }
        local budgets = { 'requests', 'tokens', 'input tokens', 'output tokens' }
        local learned = {}
        if type(sl.ld) == 'table' then
            for _, k in ipairs(sl.ld) do learned[k] = true end
        end
        for i = 1, 4 do
            local news = scope ~= wasScope or next[i] ~= was[i]
            -- LimitMismatch::find: a learned limit, or an unset one while learning, follows.
            local follows = learned[learnedKeys[i]] or (sl[keys[i]] == nil and l.ln == true)
            if news and not follows and limitDiffers(next[i], sl[keys[i]], w) then
                local e = event(EVENT.LIMIT_MISMATCH, a.provider)
                e.caller = a.caller
                e.reason = limitNotice(budgets[i], next[i], sl[keys[i]], w, scope)
            end
        end
    end
    p.rr, p.rk, p.ra = next[1], next[2], now
    -- Written only once known: a state that never saw them reads as before.
    if next[3] >= 0 or p.ri then p.ri = next[3] end
    if next[4] >= 0 or p.ro then p.ro = next[4] end
    if scope ~= '' or p.rs then p.rs = scope end
    if pl then
        p.pl = { a = now, s = pl.s, f = pl.f, fr = pl.fr, v = pl.v, vr = pl.vr }
    end
    touch(p)
    commit()
    return reply({ written = true })
end

-- RollingWindow::adjust: into the admission's bucket if it is still in the ring, else what it
-- used beyond the estimate counts now. Input and output only in a window that splits.
local function adjust(sc, at, t, dk, di, dout)
    local k = math.floor(at / width(sc.w))
    local s = k % SLOTS
    local b, x = sc.b, sc.x
    if b[3 * s + 1] == k then
        bump(b, 3 * s + 3, dk)
        if x then
            bump(x, 2 * s + 1, di)
            bump(x, 2 * s + 2, dout)
        end
        return
    end
    local lk, li, lo = math.max(0, dk), math.max(0, di), math.max(0, dout)
    if lk > 0 or (x and (li > 0 or lo > 0)) then record(sc, t, 0, lk, li, lo) end
end

-- QuotaPolicy::correct: what an admission at `at` used beyond (or below) what it counted, in
-- the bucket of `at` (and the day), in every scope the model counts in; input and output only
-- in scopes that split. false: nothing to do (or the provider no longer has limits).
local function correctBy(p, model, at, dk, di, dout)
    local l = limitsOf(p.n)
    if at > now or not l or (dk == 0 and di == 0 and dout == 0) then return false end
    for _, sc in ipairs(p.sc) do
        local b = budgetsOf(l, sc.m)
        if sc.m == '' or (b and classMatches(sc.m, b, model)) then
            local si, so = di, dout
            if not sc.x then si, so = 0, 0 end
            adjust(sc, at, now, dk, si, so)
            if sc.dy then adjust(sc.dy, at, now, dk, si, so) end
            if sc.cu then
                local start, dayEnd = dayOf(l, now)
                if sc.cs == start then
                    -- Of an admission on an earlier day only what it used beyond its estimate counts.
                    local earlier = at < start or at >= dayEnd
                    local function add(i, v)
                        if earlier and v < 0 then v = 0 end
                        bump(sc.cu, i, v)
                    end
                    add(2, dk)
                    add(3, si)
                    add(4, so)
                end
            end
        end
    end
    touch(p)
    if dk < 0 or di < 0 or dout < 0 then ring = true end
    return true
end

-- correctAdmission (localquotabackend.cpp): a correction of the total only.
local function correctAdmission(p, model, at, estimated, used)
    local delta = clamp(used, 0, MAX_BUCKET_COUNT) - clamp(estimated, 0, MAX_BUCKET_COUNT)
    if delta == 0 then return 0 end
    if correctBy(p, model, at, delta, 0, 0) then return delta end
    return 0
end

function ops.correctTokens()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    if a.used ~= a.estimated and a.at <= now then -- else no state is even read
        correctAdmission(providerOf(a.provider, l), a.model, a.at, a.estimated, a.used)
    end
    commit()
    return reply({})
end

function ops.releaseStale()
    local n = 0
    for _, name in ipairs(knownProviders()) do
        local l = limitsOf(name)
        if l and redis.call('HEXISTS', KEYS[2], 'p:' .. name) == 1 then
            local p = providerOf(name, l)
            local k = reclaimSlots(p, l, now, a.overdue, a.who)
            local kept = {}
            for _, w in W.all(p) do
                if whyWaiterGone(w, now) == '' then
                    kept[#kept + 1] = w.tk
                else
                    k = k + 1
                    W.drop(w.tk)
                end
            end
            p.q = W.join(kept)
            if k > 0 then touch(p) end
            n = n + k
        end
    end
    if n > 0 then ring = true end
    commit()
    return reply({ released = n })
end

local function slotOf(provider, fence)
    local l = limitsOf(provider)
    if not l or redis.call('HEXISTS', KEYS[2], 'p:' .. provider) == 0 then return nil end
    local p = providerOf(provider, l)
    for i, s in ipairs(p.sl) do
        if s.f == fence then return p, i end
    end
    return nil
end

function ops.releaseSlot()
    local p, i = slotOf(a.provider, a.fence)
    if not p then return reply({ found = false }) end
    local s = p.sl[i]
    local e = event(EVENT.RELEASE, a.provider)
    e.caller = s.c
    e.model = s.m
    e.pid = s.pid
    e.fence = a.fence
    if a.who ~= '' then e.reason = 'forced by ' .. a.who end
    table.remove(p.sl, i)
    touch(p)
    ring = true
    W.handOff(p, limitsOf(a.provider))
    commit()
    return reply({ found = true })
end

-- LocalQuotaBackend::finishAdmission: releaseSlot + correctTokens (by the slot's own admission
-- time and estimate when it has one) + success, in one call: the end of a proxied exchange.
function ops.finishAdmission()
    local p, i = slotOf(a.provider, a.fence)
    local at, estimated, model, caller = a.at, a.estimated, a.model, a.caller
    local estIn, estOut = a.estIn or 0, a.estOut or 0
    local found = false
    if p then
        local s = p.sl[i]
        at, estimated, model, caller = s.a, s.n, s.m, s.c
        if s.ei then estIn, estOut = s.ei, s.eo or 0 end
        local e = event(EVENT.RELEASE, a.provider)
        e.caller = s.c
        e.model = s.m
        e.pid = s.pid
        e.fence = a.fence
        table.remove(p.sl, i)
        found = true
        ring = true
    else
        local l, refusal = knownLimits(a.provider)
        if refusal then return refusal end
        p = providerOf(a.provider, l)
    end
    if a.used >= 0 and at > 0 then
        -- deltaOf (localquotabackend.cpp): the estimate as costOf recorded it, then the used
        -- split where the answer gave one.
        local was = costOf({ tokens = estimated, ['in'] = estIn, out = estOut })
        local dk = clamp(a.used, 0, MAX_BUCKET_COUNT) - was[2]
        local di, dout = 0, 0
        if (a.usedIn or -1) >= 0 and (a.usedOut or -1) >= 0 then
            di = clamp(a.usedIn, 0, MAX_BUCKET_COUNT) - was[3]
            dout = clamp(a.usedOut, 0, MAX_BUCKET_COUNT) - was[4]
        end
        correctBy(p, model, at, dk, di, dout)
    end
    if a.ok then
        p.c = 0
        local ok = event(EVENT.OK, a.provider)
        ok.caller = caller
    end
    touch(p)
    if found then
        -- The release may have been forced on a provider whose limits are corrupt or gone.
        local l = limitsOf(a.provider)
        W.handOff(p, l)
    end
    commit()
    return reply({ found = found })
end

function ops.renewSlot()
    local lease = math.max(1, a.lease)
    local p, i = slotOf(a.provider, a.fence)
    if p then
        p.sl[i].lu = plus(now, lease)
        p.sl[i].ll = lease
        touch(p)
        commit()
        return reply({ found = true })
    end
    -- A slot the home does not know, renewed by a holder that still runs. Its fence is older
    -- than the state's last reset: the state was lost with it, and it takes a placeholder of
    -- that reset back (QuotaPolicy::reestablish). A home without the provider's limits or state
    -- (a flush, a restart without persistence) lost its data: that is noted, so that the limits
    -- restored meanwhile start conservatively; the holder renews again and takes its slot back
    -- from their placeholders.
    local h = a.holder
    if type(h) ~= 'table' or not isInt(h.pid, 1, NEVER) or not isInt(h.a, 0, NEVER) or not isInt(h.n, 0, NEVER)
        or type(h.c) ~= 'string' or #h.c > 512 or type(h.m) ~= 'string' or #h.m > 512 or not isInt(h.st, 0, NEVER)
        or not isInt(a.fence, 1, NEVER) then
        return reply({ found = false })
    end
    local l = limitsOf(a.provider)
    local known = l and redis.call('HEXISTS', KEYS[2], 'p:' .. a.provider) == 1
    if not known then
        if issuedBefore(a.fence) and lostAt() == 0 then
            markLost('a holder (fence ' .. string.format('%d', a.fence) .. ' of \'' .. a.provider
                .. '\') renewed a slot this home no longer knows: its data was lost')
        end
        if not l then
            commit()
            return reply({ found = false })
        end
    end
    p = providerOf(a.provider, l)
    -- A fence this state has not issued yet: the state went back in time (a failover to a
    -- replica that lagged, an older copy restored), so what it misses since is unknown: it is
    -- taken as lost, as above. Fences go on above the holder's, so none is issued twice.
    local g = global()
    if a.fence >= g.nf then
        local why = 'a holder renewed fence ' .. string.format('%d', a.fence) .. ' of \'' .. a.provider
            .. '\', which this state has not issued yet: the data went back in time (a failover to a replica'
            .. ' that lagged, an older copy restored); windows restart full, slots held until their holders renew'
        markLost(why)
        local e = event(EVENT.RESET, a.provider)
        e.reason = why
        g.nf = math.max(a.fence + 1, now * 1000)
        dirty['g'] = g
        fillConservatively(p, l, now)
        touch(p)
        -- Its slot is recorded even when the old slots leave no placeholder: it runs.
        local free = false
        for _, s in ipairs(p.sl) do
            if s.pid == 0 and a.fence < s.a * 1000 then free = true end
        end
        if not free and #p.sl < MAX_SLOTS then
            p.sl[#p.sl + 1] = { f = 0, pid = 0, a = now, n = 0, c = '', m = '', h = '', st = 0, lu = now, ll = 1 }
        end
    end
    for _, s in ipairs(p.sl) do
        if s.pid == 0 and s.a > 0 and a.fence < s.a * 1000 then
            s.f = a.fence
            s.pid = h.pid
            s.a = h.a
            s.n = h.n
            s.c = h.c
            s.m = h.m
            s.h = myHost
            s.st = h.st
            s.lu = plus(now, lease)
            s.ll = lease
            touch(p)
            commit()
            return reply({ found = true })
        end
    end
    commit()
    return reply({ found = false })
end

-- Admissions whose reply the caller never got (the connection broke after the call reached
-- the server): the caller, alive and unaware, gives back what they took — a slot or a queue
-- place — so nothing stays held by a process that does not know it holds it.
function ops.abandon()
    for i, provider in ipairs(a.providers) do
        local rid = a.rids[i]
        local l = limitsOf(provider)
        if l and redis.call('HEXISTS', KEYS[2], 'p:' .. provider) == 1 then
            local p = providerOf(provider, l)
            local kept = {}
            for _, s in ipairs(p.sl) do
                if s.rid == rid then
                    local e = event(EVENT.RELEASE, provider)
                    e.caller = s.c
                    e.model = s.m
                    e.pid = s.pid
                    e.fence = s.f
                    e.reason = 'given back: the admission\'s reply was lost'
                    ring = true
                else
                    kept[#kept + 1] = s
                end
            end
            local queue = {}
            for _, w in W.all(p) do
                if w.rid ~= rid then
                    queue[#queue + 1] = w.tk
                else
                    ring = true
                    W.drop(w.tk)
                end
            end
            if #kept ~= #p.sl or #queue ~= W.n(p) then
                p.sl = kept
                p.q = W.join(queue)
                touch(p)
            end
        end
    end
    commit()
    return reply({})
end

function ops.record()
    for _, line in ipairs(a.lines) do
        redis.call('XADD', KEYS[3], 'MAXLEN', '~', historyCap, '*', 'e', line)
    end
    if #a.lines > 0 then redis.call('PUBLISH', channel .. 'changed', '1') end
    return reply({})
end

-- A look (status, the dashboard): the limits and the state as stored, and whether the home's
-- marker is there. Writes nothing. A value larger than a value may be is not returned but named
-- with its size in `oversize` (and a hash with more fields than a home has, with its count), so
-- that a planted value costs neither Redis nor the client its copy and decoding. `limitsOnly`:
-- the limits alone (a writer that needs only them).
local function boundedHash(key, maxBytes, maxFields, oversize)
    local out = {}
    local fields = redis.call('HLEN', key)
    if fields > maxFields then
        oversize[#oversize + 1] = { k = key, f = '', n = fields }
        return out
    end
    for _, name in ipairs(redis.call('HKEYS', key)) do
        local bytes = redis.call('HSTRLEN', key, name)
        if #name > 128 then
            -- No field Tollgate writes has a name this long (a provider's is at most 64 bytes):
            -- named by its start and its length, never sent whole (a planted 10 MB name).
            oversize[#oversize + 1] = { k = key, f = string.sub(name, 1, 64), n = #name, nm = true }
        elseif bytes > maxBytes then
            oversize[#oversize + 1] = { k = key, f = name, n = bytes }
        else
            out[#out + 1] = name
            out[#out + 1] = redis.call('HGET', key, name)
        end
    end
    return out
end
function ops.snapshot()
    local oversize = {}
    local limits = boundedHash(KEYS[1], MAX_LIMITS_BYTES, MAX_HASH_FIELDS, oversize)
    local state = {}
    if not a.limitsOnly then state = boundedHash(KEYS[2], MAX_STATE_BYTES, MAX_STATE_FIELDS, oversize) end
    return reply({ now = now, limits = limits, state = state, home = redis.call('EXISTS', KEYS[4]),
        oversize = oversize, stall = serverClock })
end

-- What can make an operation fail half-way (Redis does not roll a script back), checked before
-- its first write: every key holds the type the script keeps there (or is absent), and the
-- calling user may run every command the script writes with, on these keys and channels
-- (Redis 7's default for a new user is no channel at all: a PUBLISH refused after the state
-- was written made `pause` exit 3 with the provider paused). Writes are what the checks cover;
-- a read the user may not do fails before anything is written anyway.
-- Only what the operation can write is checked (a check is a call into Redis, and these were
-- about a tenth of an admission): the limits operations write the limits, the home's marker and
-- the state; every other operation writes only the state, a set-aside value, the history and
-- its channels (ops.record: the history and the 'changed' channel).
local KEY_TYPES = { { 1, 'hash' }, { 2, 'hash' }, { 3, 'stream' }, { 4, 'string' }, { 5, 'hash' } }
local READ_ONLY_OPS = { snapshot = true }
-- needs: the last home's and channel's commands to check (a home's calls follow one another).
local PF = { STATE_KEY_TYPES = { { 2, 'hash' }, { 3, 'stream' } }, -- (and 5 where written: W.keepAside)
    LIMITS_OPS = { setLimits = true, removeLimits = true, importLimits = true }, needs = nil }
local function preflight()
    local limitsOp = PF.LIMITS_OPS[op] == true
    for _, k in ipairs(limitsOp and KEY_TYPES or PF.STATE_KEY_TYPES) do
        local t = redis.call('TYPE', KEYS[k[1]])
        if type(t) == 'table' then t = t.ok end
        if t ~= 'none' and t ~= k[2] then
            return refuse('corrupt', KEYS[k[1]] .. ' is a ' .. tostring(t) .. ' where Tollgate keeps a ' .. k[2]
                .. ' (set there by something else?): nothing was changed')
        end
    end
    if not redis.acl_check_cmd then return nil end -- before Redis 7: no channel permissions
    -- The commands to check are built once per home and channel (the check itself is made on
    -- every call: the user, and its ACL, may differ from one call to the next).
    local needs = PF.needs
    if not (needs and needs.limitsOp == limitsOp and needs.channel == channel and needs.k1 == KEYS[1]
            and needs.k2 == KEYS[2] and needs.k3 == KEYS[3] and needs.k4 == KEYS[4] and needs.k5 == KEYS[5]) then
        needs = { { 'HSET', KEYS[2], 'f', 'v' }, { 'XADD', KEYS[3], 'MAXLEN', '~', '1', '*', 'e', 'v' },
            { 'HDEL', KEYS[2], 'f' }, { 'HSET', KEYS[5], 'f', 'v' }, { 'PUBLISH', channel .. 'w:x', '1' },
            { 'PUBLISH', channel .. 'changed', '1' } }
        if limitsOp then
            needs[#needs + 1] = { 'HSET', KEYS[1], 'f', 'v' }
            needs[#needs + 1] = { 'HDEL', KEYS[1], 'f' }
            needs[#needs + 1] = { 'SET', KEYS[4], 'v' }
        end
        needs.limitsOp, needs.channel = limitsOp, channel
        needs.k1, needs.k2, needs.k3, needs.k4, needs.k5 = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
        PF.needs = needs
    end
    for _, c in ipairs(needs) do
        if not redis.acl_check_cmd(unpack(c)) then
            return refuse('denied', 'this Redis user may not run ' .. c[1] .. ' on ' .. c[2]
                .. ' (docs/RELIABILITY.md lists the ACL a Tollgate user needs): nothing was changed')
        end
    end
    return nil
end

local function main(keys, args)
    KEYS, ARGV = keys, args
    op = ARGV[1]
    serverClock = ARGV[2] == ''
    lostNote = nil
    if not serverClock then
        now = tonumber(ARGV[2])
    else
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    channel = ARGV[3]
    historyCap = tonumber(ARGV[4])
    a = {}
    if ARGV[5] and ARGV[5] ~= '' then
        a = cmsgpack.unpack(ARGV[5])
        if op == 'admit' then setmetatable(a, W.ADMIT_DEFAULTS) end
    end
    myHost = a.host or ''
    deadF, deadT = W.emptied(deadF), W.emptied(deadT)
    if a.deadF then for _, f in ipairs(a.deadF) do deadF[f] = true end end
    if a.deadT then for _, t in ipairs(a.deadT) do deadT[t] = true end end
    events, ring, dirty, limitsCache = W.emptied(events), false, W.emptied(dirty), W.emptied(limitsCache)
    callerTicket = 0
    readThisCall = W.emptied(readThisCall)
    W.rec, W.gone, W.ghosts, W.read, W.asideChecked = W.emptied(W.rec), W.emptied(W.gone), false, W.emptied(W.read), false
    globalState, providerStates = nil, W.emptied(providerStates)
    daySpans = nil
    if ARGV[6] and ARGV[6] ~= '' then daySpans = cmsgpack.unpack(ARGV[6]) end
    afterCommit = W.emptied(afterCommit)
    W.permits = W.emptied(W.permits)
    local f = ops[op]
    if not f then return refuse('usage', 'unknown operation ' .. tostring(op)) end
    if not READ_ONLY_OPS[op] then
        local refusal = preflight()
        if refusal then return refusal end
    end
    local ok, result = pcall(f)
    if ok then return result end
    if type(result) == 'table' and result.needday then
        return reply({ err = 'needday', day = result.needday })
    end
    if type(result) == 'table' and result.refusal then return result.refusal end
    error(result, 0)
end

-- Loaded as a function library (FUNCTION LOAD, with the name the client puts in front: the
-- definitions above run once) or run whole by EVALSHA where functions are not allowed.
-- The looks that write nothing (status, the dashboard) also go through FUNCTION_NAME_ro,
-- flagged no-writes and called by FCALL_RO (RedisConnection::callReadOnly): Redis runs it on a
-- read-only replica and while it holds writers (CLIENT PAUSE WRITE, a failover). Any other
-- operation is refused there; a write in it would be refused by Redis anyway (READ_ONLY_OPS,
-- the operations preflight() lets through unchecked, above).
local function mainReadOnly(keys, args)
    if not READ_ONLY_OPS[args[1]] then
        return refuse('usage', 'operation ' .. tostring(args[1]) .. ' writes: not through the read-only function')
    end
    return main(keys, args)
end
if redis.register_function then
    redis.register_function(FUNCTION_NAME, main)
    redis.register_function({ function_name = FUNCTION_NAME .. '_ro', callback = mainReadOnly,
        flags = { 'no-writes' } })
else
    return main(evalKeys, evalArgv)
end
