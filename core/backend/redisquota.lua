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
--   KEYS[2] state    hash  "g" -> globals, "p:<provider>" -> provider state (MessagePack)
--   KEYS[3] history  stream, field "e": one line of history.jsonl; capped (XADD MAXLEN ~)
--   KEYS[4] home     string: the home's marker, set when its first limits are set
--   KEYS[5] corrupt  hash  "<field>@<ms>" -> a state value that did not decode, set aside
-- ARGV: op, now ("" = the server's TIME: one clock for every host), channel prefix, history
-- cap, the op's arguments (MessagePack). The reply is one MessagePack map: {ok = true, ...} or
-- {err = KIND, msg = TEXT}.
--
-- Invariants:
-- - All or nothing: a script that refuses returns before it writes anything; otherwise it
--   writes everything it decided at the end (Redis does not roll a script back).
-- - Numbers are integers below 2^53 (times in unix ms, counts bounded by the limits);
--   NEVER (2^53) stands for "no time" (INT64_MAX in C++).
-- - Liveness: the script cannot see processes. A holder or waiter of the calling host is
--   alive unless the caller names it dead (deadF: fences, deadT: tickets), after probing it;
--   one of another host is alive until its lease ends.
-- - A provider with limits but no state lost its state (a restart without persistence, an
--   eviction): it restarts conservatively, windows full, as a corrupt state file does.

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
local events, ring, dirty, limitsCache -- dirty: state fields to write, field -> table

local function reply(t)
    t.ok = true
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
local function sortedKeys(t)
    local k = {}
    if t then
        for name in pairs(t) do k[#k + 1] = name end
    end
    table.sort(k)
    return k
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
local function newWindow(model, w)
    local b = {}
    for s = 0, SLOTS - 1 do
        b[3 * s + 1] = -1
        b[3 * s + 2] = 0
        b[3 * s + 3] = 0
    end
    return { m = model, w = clamp(w, 1, MAX_WINDOW_MS), b = b }
end
local function oldest(sc, t)
    return math.floor((t - sc.w) / width(sc.w))
end
local function usage(sc, t)
    local lo = oldest(sc, t)
    local b = sc.b
    local r, k = 0, 0
    for s = 0, SLOTS - 1 do
        local i = b[3 * s + 1]
        if i >= 0 and i >= lo then
            r = r + b[3 * s + 2]
            k = k + b[3 * s + 3]
        end
    end
    return r, k
end
local function record(sc, t, req, tok)
    local k = math.floor(t / width(sc.w))
    local s = k % SLOTS
    local b = sc.b
    if b[3 * s + 1] ~= k then
        -- A future bucket (the clock went back) is never overwritten: fold into it instead.
        if b[3 * s + 1] > k then
            b[3 * s + 2] = math.min(b[3 * s + 2] + req, MAX_BUCKET_COUNT)
            b[3 * s + 3] = math.min(b[3 * s + 3] + tok, MAX_BUCKET_COUNT)
            return
        end
        b[3 * s + 1] = k
        b[3 * s + 2] = 0
        b[3 * s + 3] = 0
    end
    b[3 * s + 2] = math.min(b[3 * s + 2] + req, MAX_BUCKET_COUNT)
    b[3 * s + 3] = math.min(b[3 * s + 3] + tok, MAX_BUCKET_COUNT)
end
local function whenFits(sc, t, req, rl, tok, tl)
    if (rl >= 0 and req > rl) or (tl >= 0 and tok > tl) then return NEVER end
    local ur, ut = usage(sc, t)
    local function fits()
        return (rl < 0 or ur + req <= rl) and (tl < 0 or ut + tok <= tl)
    end
    if fits() then return t end
    local lo = oldest(sc, t)
    local live = {}
    local b = sc.b
    for s = 0, SLOTS - 1 do
        local i = b[3 * s + 1]
        if i >= 0 and i >= lo then live[#live + 1] = { i, b[3 * s + 2], b[3 * s + 3] } end
    end
    table.sort(live, function(x, y) return x[1] < y[1] end)
    local g = width(sc.w)
    for _, e in ipairs(live) do
        ur = ur - e[2]
        ut = ut - e[3]
        local leaves = (e[1] + 1) * g + sc.w
        if fits() then return math.max(leaves, t) end
    end
    return NEVER
end
-- RollingWindow::boundFuture
local function boundFuture(sc, t)
    local k = math.floor(t / width(sc.w))
    local b = sc.b
    local r, n, moved = 0, 0, false
    for s = 0, SLOTS - 1 do
        if b[3 * s + 1] > k + BUCKETS then
            r = r + b[3 * s + 2]
            n = n + b[3 * s + 3]
            b[3 * s + 1] = -1
            b[3 * s + 2] = 0
            b[3 * s + 3] = 0
            moved = true
        end
    end
    if moved then record(sc, t, r, n) end
    return moved
end
local function rescale(sc, w, t)
    if clamp(w, 1, MAX_WINDOW_MS) == sc.w then return end
    local r, k = usage(sc, t)
    local fresh = newWindow(sc.m, w)
    sc.w = fresh.w
    sc.b = fresh.b
    if r ~= 0 or k ~= 0 then record(sc, t, r, k) end
end

-- Limits ---------------------------------------------------------------------------------------

local DEFAULT_LIMITS = { w = DEFAULT_WINDOW_MS, h = DEFAULT_HEADROOM_PERCENT, bb = DEFAULT_BACKOFF_BASE_MS,
    bc = DEFAULT_BACKOFF_CAP_MS, mh = DEFAULT_MAX_HOLD_MS }

local function limitsOf(provider)
    if limitsCache[provider] ~= nil then return limitsCache[provider] end
    local raw = redis.call('HGET', KEYS[1], provider)
    local l = false
    if raw then
        local ok, v = pcall(cjson.decode, raw)
        if not ok or type(v) ~= 'table' or type(v.w) ~= 'number' or type(v.h) ~= 'number' then
            return nil, 'the limits of \'' .. provider .. '\' in ' .. KEYS[1] .. ' do not parse'
        end
        l = v
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

-- State ----------------------------------------------------------------------------------------

local function isInt(v, lo, hi)
    return type(v) == 'number' and v == v and math.floor(v) == v and v >= lo and v <= hi
end
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
    l4 = 'int', pu = 'int', la = 'int', at = 'int', rt = 'int', sc = 'table', sl = 'table', q = 'table' }
local SCOPE_SPEC = { m = 'string', w = 'int', b = 'table' }
local SLOT_SPEC = { f = 'int', pid = 'int', a = 'int', n = 'int', c = 'string', m = 'string', h = 'string',
    st = 'int', lu = 'int' }
local WAITER_SPEC = { tk = 'int', pid = 'int', e = 'int', d = 'int', n = 'int', c = 'string', m = 'string',
    s = 'boolean', r = 'int', h = 'string', st = 'int', lu = 'int' }

local function validProvider(p)
    if not checkFields(p, PROVIDER_SPEC) or #p.sl > MAX_SLOTS or #p.q > MAX_WAITERS then return false end
    -- The provider's reported limits (noteLimits) are optional: a state from before them has none.
    if (p.ra ~= nil and not isInt(p.ra, 0, NEVER)) or (p.rr ~= nil and not isInt(p.rr, -1, MAX_REPORTED))
        or (p.rk ~= nil and not isInt(p.rk, -1, MAX_REPORTED)) then
        return false
    end
    for _, sc in ipairs(p.sc) do
        -- The buckets' values are not checked one by one here (that cost a fifth of every
        -- call): one that is not a number fails the operation (fail closed, nothing written),
        -- and the client's decoder refuses it by name.
        if not checkFields(sc, SCOPE_SPEC) or sc.w < 1 or sc.w > MAX_WINDOW_MS or #sc.b ~= 3 * SLOTS then
            return false
        end

    end
    for _, s in ipairs(p.sl) do
        if not checkFields(s, SLOT_SPEC) then return false end
    end
    for _, w in ipairs(p.q) do
        if not checkFields(w, WAITER_SPEC) then return false end
    end
    return true
end

local function setAside(field, raw, why)
    redis.call('HSET', KEYS[5], field .. '@' .. now, raw)
    local e = event(EVENT.RESET, field == 'g' and '' or string.sub(field, 3))
    e.reason = why
end

-- Decoded states kept between calls (upvalues of the function library live until it is
-- loaded again), by the exact string they were decoded from or encoded to, so an operation
-- neither decodes nor validates the state the previous one wrote (most of a call's time).
-- A value is taken out when a call reads it (the call may change it, and may stop before it
-- writes) and put back only by commit(), beside the encoding it wrote; any other writer, a
-- restart or a set-aside changes the string, and then it is decoded and validated as ever.
-- Under EVALSHA the script runs whole each time and starts with an empty cache.
local decoded, decodedCount = {}, 0
local MAX_DECODED = 256 -- states kept at most (homes x providers); past it, start over
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
        if kept.raw == raw then return kept.v end
    end
    local ok, v = pcall(cmsgpack.unpack, raw)
    if ok and valid(v) then return v end
    return false
end

local globalState -- per call (main)
local function global()
    if globalState then return globalState end
    local raw = redis.call('HGET', KEYS[2], 'g')
    local g = decode('g', raw, function(v) return checkFields(v, GLOBAL_SPEC) end)
    if g == false then
        setAside('g', raw, 'the global state in ' .. KEYS[2] .. ' did not decode; set aside in ' .. KEYS[5])
        -- Fences and tickets only grow: restart them past any time-based value seen so far.
        g = { nf = now * 1000, nt = now * 1000, pz = false, pr = '', pat = 0 }
        dirty['g'] = g
    elseif g == nil then
        -- A new home, or one whose data Redis lost. Fences and tickets start from the server's
        -- clock (in µs), so they still only grow across a loss: no caller holding an old fence
        -- can be mistaken for a newer one.
        g = { nf = now * 1000, nt = now * 1000, pz = false, pr = '', pat = 0 }
        dirty['g'] = g
    end
    globalState = g
    return g
end

local function newProvider(name)
    return { n = name, pz = false, pr = '', pa = 0, c = 0, bu = 0, l4 = 0, pu = 0, la = 0, at = 0, rt = 0,
        sc = {}, sl = {}, q = {} }
end
local function scope(p, model)
    for _, sc in ipairs(p.sc) do
        if sc.m == model then return sc end
    end
    return nil
end

local function syncProvider(p, l, t)
    local changed = false
    local function want(model, w)
        local sc = scope(p, model)
        if sc then
            if sc.w ~= w then
                rescale(sc, w, t)
                changed = true
            end
        else
            p.sc[#p.sc + 1] = newWindow(model, w)
            changed = true
        end
    end
    want('', l.w)
    for _, m in ipairs(sortedKeys(l.m)) do want(m, l.m[m].w) end
    local kept = {}
    for _, sc in ipairs(p.sc) do
        if sc.m == '' or (l.m and l.m[sc.m]) then
            kept[#kept + 1] = sc
        else
            changed = true
        end
    end
    p.sc = kept
    return changed
end

local function fillConservatively(p, l, t)
    syncProvider(p, l, t)
    for _, sc in ipairs(p.sc) do
        if sc.m == '' then
            record(sc, t, math.max(0, limitOrNone(l, l.r)), math.max(0, limitOrNone(l, l.t)))
        elseif l.m and l.m[sc.m] then
            local ml = l.m[sc.m]
            record(sc, t, math.max(0, limitOrNone(l, ml.r)), math.max(0, limitOrNone(l, ml.t)))
        end
    end
    if l.par then
        while #p.sl < l.par do
            p.sl[#p.sl + 1] = { f = 0, pid = 0, a = t, n = 0, c = '(unknown: state was reset)', m = '', h = '',
                st = 0, lu = 0 }
        end
    end
end

local providerStates -- per call (main)
-- The provider's state, with `l` its limits (false: none). Missing with limits: lost, so it
-- restarts conservatively; one that does not decode is set aside first.
local function providerOf(name, l)
    if providerStates[name] then return providerStates[name] end
    local field = 'p:' .. name
    local raw = redis.call('HGET', KEYS[2], field)
    local p = decode(field, raw, validProvider)
    if p == false then
        setAside(field, raw, 'the state of \'' .. name .. '\' in ' .. KEYS[2]
            .. ' did not decode; set aside in ' .. KEYS[5] .. ', restarting conservatively')
    elseif p == nil and l then
        local e = event(EVENT.RESET, name)
        e.reason = 'the state of \'' .. name .. '\' was missing from Redis (lost: a restart without persistence,'
            .. ' a flush or an eviction); windows restart full'
    end
    if not p then
        p = newProvider(name)
        if l then fillConservatively(p, l, now) end
        dirty[field] = p
    end
    providerStates[name] = p
    return p
end
local function touch(p)
    dirty['p:' .. p.n] = p
end

-- Liveness (see the invariants above) -------------------------------------------------------

local function leaseEnd(s, l)
    if s.lu ~= 0 then return s.lu end
    return plus(s.a, l.mh)
end
local function whyHolderGone(s, l, t)
    if s.pid == 0 then
        if t < plus(s.a, l.w) then return '' end
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
    while #p.q > 0 do
        local w = p.q[1]
        local why = whyWaiterGone(w, t)
        if why == '' then break end
        local e = event(EVENT.GAVE_UP, p.n)
        e.caller = w.c
        e.model = w.m
        e.pid = w.pid
        e.waited_ms = t - w.e
        e.reason = why
        table.remove(p.q, 1)
        changed = true
    end
    return changed
end
local function renewWaiter(p, ticket, t)
    for _, w in ipairs(p.q) do
        if w.tk == ticket then
            if w.lu - t > math.floor(WAITER_LEASE_MS * 2 / 3) then return false end
            w.lu = t + WAITER_LEASE_MS
            return true
        end
    end
    return false
end
local function dequeue(p, ticket)
    for i, w in ipairs(p.q) do
        if w.tk == ticket then
            table.remove(p.q, i)
            return true
        end
    end
    return false
end

-- Policy ---------------------------------------------------------------------------------------

local function backoffUntil(p, t)
    return math.min(p.bu, plus(t, MAX_STOP_MS))
end
local function boundTimes(g, p, l, t)
    local changed = false
    local function atMost(obj, key, max)
        if obj[key] > max then
            obj[key] = max
            changed = true
        end
    end
    atMost(p, 'bu', plus(t, MAX_STOP_MS))
    atMost(p, 'pu', plus(math.max(p.bu, t), math.max(0, l.w)))
    atMost(p, 'la', t)
    atMost(p, 'l4', t)
    atMost(p, 'pa', t)
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
        atMost(s, 'a', t)
        atMost(s, 'lu', slotLease)
    end
    for _, w in ipairs(p.q) do
        atMost(w, 'e', t)
        atMost(w, 'lu', plus(t, WAITER_LEASE_MS))
    end
    for _, sc in ipairs(p.sc) do
        if boundFuture(sc, t) then changed = true end
    end
    return changed
end

local function impossible(l, r)
    if r.tokens < 0 then return 'a negative number of tokens' end
    -- An estimate (the proxy's reading of a body, AdmitRequest::estimated) is never too large:
    -- it waits for room instead (checkedTokens).
    if r.estimated then return nil end
    if l.t and r.tokens > effective(l, l.t) then
        return 'asks for ' .. r.tokens .. ' tokens, but provider \'' .. r.provider .. '\' allows '
            .. effective(l, l.t) .. ' per window'
    end
    if r.model ~= '' and l.m and l.m[r.model] and l.m[r.model].t and r.tokens > effective(l, l.m[r.model].t) then
        return 'asks for ' .. r.tokens .. ' tokens, but model \'' .. r.model .. '\' allows '
            .. effective(l, l.m[r.model].t) .. ' per window'
    end
    return nil
end

-- The tokens a window is checked for: an estimate larger than the limit as the whole limit, so it
-- is admitted once the window is empty (recorded whole; its real usage corrects it), as
-- QuotaPolicy's capped() does.
local function checkedTokens(r, tl)
    if r.estimated and tl >= 0 then return math.min(r.tokens, tl) end
    return r.tokens
end

local function windowAllows(sc, rl, tl, tokens, t, d)
    if rl < 0 and tl < 0 then return true end
    local at = whenFits(sc, t, 1, rl, tokens, tl)
    if at <= t then return true end
    local requestsFit = rl < 0 or whenFits(sc, t, 1, rl, 0, -1) <= t
    if requestsFit then d.reason = R_TOKENS else d.reason = R_WINDOW end
    d.retryAt = at
    return false
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
    if #p.q > 0 and (ticket == 0 or p.q[1].tk ~= ticket) then
        d.reason = R_QUEUE
        return d
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
    local sc = scope(p, '')
    local tl = limitOrNone(l, l.t)
    if sc and not windowAllows(sc, limitOrNone(l, l.r), tl, checkedTokens(r, tl), t, d) then return d end
    if r.model ~= '' then
        local ml = l.m and l.m[r.model]
        local msc = scope(p, r.model)
        local mtl = ml and limitOrNone(l, ml.t)
        if ml and msc and not windowAllows(msc, limitOrNone(l, ml.r), mtl, checkedTokens(r, mtl), t, d) then
            return d
        end
    end
    if r.slot and l.par and #p.sl >= l.par then
        d.reason = R_SLOTS
        for _, s in ipairs(p.sl) do
            if s.pid == 0 then d.retryAt = math.min(d.retryAt, plus(s.a, l.w)) end
        end
        return d
    end
    d.admitted = true
    return d
end

local function admitApply(g, p, l, r, ticket, t, enqueue)
    local d = evaluate(g, p, l, r, ticket, t)
    if not d.admitted then
        if ticket ~= 0 then
            for _, w in ipairs(p.q) do
                if w.tk == ticket then w.r = d.reason end
            end
        elseif enqueue then
            if #p.q >= MAX_WAITERS then
                return nil, 'too many callers are already waiting for provider \'' .. p.n .. '\''
            end
            local wpid = r.pid
            if r.wpid > 0 then wpid = r.wpid end
            local w = { tk = g.nt, pid = wpid, e = t, d = r.deadline, n = r.tokens, c = r.caller, m = r.model,
                s = r.slot, r = d.reason, h = myHost, st = r.wst, lu = t + WAITER_LEASE_MS, rid = r.rid }
            g.nt = g.nt + 1
            dirty['g'] = g
            p.q[#p.q + 1] = w
            d.ticket = w.tk
        end
        return d
    end
    for _, sc in ipairs(p.sc) do
        if sc.m == '' or sc.m == r.model then record(sc, t, 1, r.tokens) end
    end
    d.fence = g.nf
    g.nf = g.nf + 1
    dirty['g'] = g
    if r.slot and l.par then
        local lease = l.mh
        if r.lease > 0 then lease = r.lease end
        p.sl[#p.sl + 1] = { f = d.fence, pid = r.pid, a = t, n = r.tokens, c = r.caller, m = r.model, h = myHost,
            st = r.st, lu = plus(t, lease), rid = r.rid }
        d.slotTaken = true
    end
    if ticket ~= 0 then dequeue(p, ticket) end
    p.la = t
    p.at = p.at + 1
    return d
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
    return math.max(e, clamp(ra, 0, MAX_BACKOFF_MS))
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

local function commit()
    local args = {}
    for field, v in pairs(dirty) do
        local raw = cmsgpack.pack(v)
        args[#args + 1] = field
        args[#args + 1] = raw
        local key = cacheKey(field)
        if decoded[key] == nil then
            if decodedCount >= MAX_DECODED then decoded, decodedCount = {}, 0 end
            decodedCount = decodedCount + 1
        end
        decoded[key] = { raw = raw, v = v }
    end
    if #args > 0 then redis.call('HSET', KEYS[2], unpack(args)) end
    for _, e in ipairs(events) do
        redis.call('XADD', KEYS[3], 'MAXLEN', '~', historyCap, '*', 'e', eventLine(e))
    end
    if ring then redis.call('PUBLISH', channel .. 'ring', '1') end
    if #args > 0 or #events > 0 then redis.call('PUBLISH', channel .. 'changed', '1') end
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
    local ticket = a.ticket
    if ticket ~= 0 then
        local queued = false
        for _, w in ipairs(p.q) do
            if w.tk == ticket then queued = true end
        end
        if not queued then ticket = 0 end -- judged a ghost while we lived: queue again
    end
    if ticket ~= 0 and renewWaiter(p, ticket, now) then changed = true end
    local lease = l.mh
    if a.lease > 0 then lease = a.lease end
    local d, err = admitApply(g, p, l, a, ticket, now, a.enqueue)
    if not d then return refuse('busy', err) end
    if not d.admitted and d.reason == R_SLOTS and a.slot then
        if reclaimSlots(p, l, now, false, '') > 0 then
            changed = true
            d, err = admitApply(g, p, l, a, d.ticket, now, a.enqueue)
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
    elseif not d.admitted and d.reason == R_QUEUE and #p.q > 0 then
        local w = p.q[1]
        if w.h == myHost and not deadT[w.tk] then
            suspects[#suspects + 1] = { k = 'w', id = w.tk, pid = w.pid, st = w.st }
        end
    end
    if d.admitted then
        local e = event(EVENT.ADMIT, a.provider)
        e.caller = a.caller
        e.model = a.model
        e.pid = a.pid
        e.tokens = a.tokens
        e.fence = d.fence
        e.waited_ms = a.waited
        if a.first ~= '' then e.reason = a.first end
        changed = true
        ring = ring or #p.q > 0
    elseif d.ticket ~= ticket then
        changed = true -- newly queued
    end
    if changed then touch(p) end
    commit()
    local retryAt = d.retryAt
    if retryAt >= NEVER then retryAt = -1 end
    return reply({ admitted = d.admitted, reason = d.reason, retryAt = retryAt, fence = d.fence, ticket = d.ticket,
        slotTaken = d.slotTaken, lease = lease, now = now, suspects = suspects })
end

function ops.leave()
    local l = limitsOf(a.provider)
    local raw = redis.call('HEXISTS', KEYS[2], 'p:' .. a.provider)
    if l and raw == 1 then
        local p = providerOf(a.provider, l)
        if dequeue(p, a.ticket) then
            touch(p)
            ring = true
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
    local base = backoffFor(l, p.c + 1, ra)
    -- Jitter: up to 10% of the backoff (at most 5 s), from the caller's draw.
    local span = math.min(math.floor(base / 10), MAX_JITTER_MS)
    local jitter = 0
    if span > 0 then jitter = a.draw % (span + 1) end
    p.c = clamp(p.c, 0, MAX_CONSECUTIVE_429)
    p.c = math.min(p.c + 1, MAX_CONSECUTIVE_429)
    local backoff = backoffFor(l, p.c, ra)
    p.bu = math.max(backoffUntil(p, now), plus(now, plus(backoff, clamp(jitter, 0, MAX_JITTER_MS))))
    p.pu = plus(p.bu, l.w)
    p.l4 = now
    p.rt = p.rt + 1
    local e = event(EVENT.RATE_LIMITED, a.provider)
    e.caller = a.caller
    e.pid = a.pid
    e.retry_after_ms = clamp(ra, 0, MAX_BACKOFF_MS)
    e.backoff_ms = p.bu - now
    e.reason = p.c .. ' consecutive'
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
    else
        p = newProvider(a.provider) -- a new provider starts empty
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
    redis.call('HDEL', KEYS[2], 'p:' .. a.provider)
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
    if a.replace then
        for _, name in ipairs(existing) do
            if incoming[name] == nil then
                redis.call('HDEL', KEYS[1], name)
                redis.call('HDEL', KEYS[2], 'p:' .. name)
                local e = event(EVENT.LIMITS, name)
                e.reason = byWhom('removed by an import', a.who)
                changedNames[#changedNames + 1] = name
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
    for i, name in ipairs(a.names) do
        local value = a.values[i]
        local current = redis.call('HGET', KEYS[1], name)
        if current ~= value then
            local l = cjson.decode(value)
            local p
            if current or redis.call('HEXISTS', KEYS[2], 'p:' .. name) == 1 then
                p = providerOf(name, l)
            else
                p = newProvider(name)
                providerStates[name] = p
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
    touch(p)
    local e = event(EVENT.BACKOFF_RESET, a.provider)
    e.reason = a.reason
    ring = true
    commit()
    return reply({})
end

function ops.hold()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    local p = providerOf(a.provider, l)
    local untilMs = math.min(clamp(a['until'], -NEVER, NEVER), plus(now, MAX_STOP_MS))
    if untilMs > backoffUntil(p, now) then
        p.bu = untilMs
        touch(p)
        local e = event(EVENT.HOLD, a.provider)
        e.reason = a.reason
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
local function limitNotice(budget, reported, given, w)
    local out = 'provider reports ' .. string.format('%d', reported) .. ' ' .. budget .. '/min; '
    if not given then
        if budget == 'requests' then return out .. 'Tollgate sets no request limit' end
        return out .. 'Tollgate sets no token limit'
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

-- LocalQuotaBackend::noteReportedLimits
function ops.noteLimits()
    local l, refusal = knownLimits(a.provider)
    if refusal then return refusal end
    local p = providerOf(a.provider, l)
    local keptR, keptT, keptAt = p.rr or -1, p.rk or -1, p.ra or 0
    local r, k = keptR, keptT
    if a.requests >= 0 then r = math.min(a.requests, MAX_REPORTED) end
    if a.tokens >= 0 then k = math.min(a.tokens, MAX_REPORTED) end
    if r == keptR and k == keptT and keptAt <= now and now - keptAt < REPORT_REFRESH_MS then
        return reply({ written = false })
    end
    local function notice(budget, reported, kept, given)
        if reported == kept or not limitDiffers(reported, given, l.w) then return end
        local e = event(EVENT.LIMIT_MISMATCH, a.provider)
        e.caller = a.caller
        e.reason = limitNotice(budget, reported, given, l.w)
    end
    notice('requests', r, keptR, l.r)
    notice('tokens', k, keptT, l.t)
    p.rr, p.rk, p.ra = r, k, now
    touch(p)
    commit()
    return reply({ written = true })
end

-- RollingWindow::adjustTokens
local function adjustTokens(sc, at, t, delta)
    local k = math.floor(at / width(sc.w))
    local s = k % SLOTS
    local b = sc.b
    if b[3 * s + 1] == k then
        b[3 * s + 3] = clamp(b[3 * s + 3] + delta, 0, MAX_BUCKET_COUNT)
        return
    end
    if delta > 0 then record(sc, t, 0, delta) end
end

-- correctAdmission (localquotabackend.cpp): the difference between what an admission at `at`
-- counted and what it used, in the bucket of `at`, provider-wide and in the model's scope.
-- Returns the difference applied (0: nothing changed).
local function correctAdmission(p, model, at, estimated, used)
    local delta = clamp(used, 0, MAX_BUCKET_COUNT) - clamp(estimated, 0, MAX_BUCKET_COUNT)
    if delta == 0 or at > now then return 0 end
    for _, sc in ipairs(p.sc) do
        if sc.m == '' or sc.m == model then adjustTokens(sc, at, now, delta) end
    end
    touch(p)
    if delta < 0 then ring = true end
    return delta
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
            for _, w in ipairs(p.q) do
                if whyWaiterGone(w, now) == '' then kept[#kept + 1] = w else k = k + 1 end
            end
            p.q = kept
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
    commit()
    return reply({ found = true })
end

-- LocalQuotaBackend::finishAdmission: releaseSlot + correctTokens (by the slot's own admission
-- time and estimate when it has one) + success, in one call: the end of a proxied exchange.
function ops.finishAdmission()
    local p, i = slotOf(a.provider, a.fence)
    local at, estimated, model, caller = a.at, a.estimated, a.model, a.caller
    local found = false
    if p then
        local s = p.sl[i]
        at, estimated, model, caller = s.a, s.n, s.m, s.c
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
    if a.used >= 0 and at > 0 then correctAdmission(p, model, at, estimated, a.used) end
    if a.ok then
        p.c = 0
        local ok = event(EVENT.OK, a.provider)
        ok.caller = caller
    end
    touch(p)
    commit()
    return reply({ found = found })
end

function ops.renewSlot()
    local p, i = slotOf(a.provider, a.fence)
    if not p then return reply({ found = false }) end
    p.sl[i].lu = plus(now, math.max(1, a.lease))
    touch(p)
    commit()
    return reply({ found = true })
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
            for _, w in ipairs(p.q) do
                if w.rid ~= rid then queue[#queue + 1] = w else ring = true end
            end
            if #kept ~= #p.sl or #queue ~= #p.q then
                p.sl = kept
                p.q = queue
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

function ops.snapshot()
    return reply({ now = now, limits = redis.call('HGETALL', KEYS[1]), state = redis.call('HGETALL', KEYS[2]),
        home = redis.call('EXISTS', KEYS[4]) })
end

local function main(keys, args)
    KEYS, ARGV = keys, args
    op = ARGV[1]
    if ARGV[2] ~= '' then
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
    end
    myHost = a.host or ''
    deadF, deadT = {}, {}
    for _, f in ipairs(a.deadF or {}) do deadF[f] = true end
    for _, t in ipairs(a.deadT or {}) do deadT[t] = true end
    events, ring, dirty, limitsCache = {}, false, {}, {}
    globalState, providerStates = nil, {}
    local f = ops[op]
    if not f then return refuse('usage', 'unknown operation ' .. tostring(op)) end
    return f()
end

-- Loaded as a function library (FUNCTION LOAD, with the name the client puts in front: the
-- definitions above run once) or run whole by EVALSHA where functions are not allowed.
if redis.register_function then
    redis.register_function(FUNCTION_NAME, main)
else
    return main(evalKeys, evalArgv)
end
