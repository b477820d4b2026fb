-- Where the Redis home's admission spends its Lua time (issue 27), run by bench/redisprofile.sh
-- under a stock Lua 5.1 (Redis's own Lua has neither `debug` nor `os`, so it cannot sample
-- itself). The library is loaded as Redis would load it, against a stand-in `redis` (an
-- in-memory hash store) and stand-in cmsgpack/cjson; the bench's admission (the arguments
-- RedisQuotaBackend::admit sends for `tollgate-bench`'s request) is replayed N times.
--
-- What it measures and what it does not: the *Lua* instructions of the script, sampled every
-- 100 instructions and charged to the function (or line) running, and how many calls of each
-- function one admission makes. The stand-ins are charged to the library line that called
-- them ("calls at line L"), but their cost is not Redis's: the C side (redis.call, cmsgpack,
-- cjson) is measured on a real server by bench/rediscosts.lua.
--
--   lua5.1 bench/redisprofile.lua LIBRARY.lua N func|line|calls
local libFile, n, mode = arg[1], tonumber(arg[2] or '20000'), arg[3] or 'func'
assert(libFile and n and (mode == 'func' or mode == 'line' or mode == 'calls'),
    'usage: lua5.1 redisprofile.lua LIBRARY.lua N func|line|calls')

-- The stand-ins. MessagePack: a value is kept by reference under a fresh name and copied on
-- each side, so that the script sees fresh tables as it does from the real codec.
local kept, lastId = {}, 0
local function deepCopy(v)
    if type(v) ~= 'table' then return v end
    local c = {}
    for k, x in pairs(v) do c[k] = deepCopy(x) end
    return c
end
cmsgpack = {
    pack = function(v)
        lastId = lastId + 1
        local name = 'mp#' .. lastId
        kept[name] = deepCopy(v)
        return name
    end,
    unpack = function(s)
        local v = kept[s]
        if v == nil then error('not a value this stand-in packed') end
        return deepCopy(v)
    end,
}
-- JSON: only what these calls need (the limits, decoded once and cached by the script; the
-- history line's strings; the home's marker).
cjson = {
    decode = function(s)
        local lua = s:gsub('%[', '{'):gsub('%]', '}'):gsub('"([%w_]+)":', '["%1"]='):gsub('null', 'nil')
        return assert(loadstring('return ' .. lua))()
    end,
    encode = function(v)
        if type(v) ~= 'table' then return type(v) == 'string' and string.format('%q', v) or tostring(v) end
        local parts = {}
        for k, x in pairs(v) do parts[#parts + 1] = string.format('%q:', k) .. cjson.encode(x) end
        return '{' .. table.concat(parts, ',') .. '}'
    end,
}
local store = {}
local tick = 0 -- ms: the clock moves 1 ms per admission
local function hash(k)
    local e = store[k]
    if not e then
        e = { t = 'hash', h = {} }
        store[k] = e
    end
    return e.h
end
local commands = {
    TIME = function()
        local ms = 1795745311000 + tick
        return { tostring(math.floor(ms / 1000)), tostring((ms % 1000) * 1000) }
    end,
    TYPE = function(k) return { ok = store[k] and store[k].t or 'none' } end,
    HSTRLEN = function(k, f) local v = store[k] and store[k].h[f]; return v and #v or 0 end,
    HGET = function(k, f) local v = store[k] and store[k].h[f]; return v or false end,
    HSET = function(k, ...)
        local h, a = hash(k), { ... }
        for i = 1, #a, 2 do h[a[i]] = a[i + 1] end
        return #a / 2
    end,
    HDEL = function(k, ...)
        local e, gone = store[k], 0
        for _, f in ipairs({ ... }) do
            if e and e.h[f] then
                e.h[f] = nil
                gone = gone + 1
            end
        end
        return gone
    end,
    HEXISTS = function(k, f) return (store[k] and store[k].h[f]) and 1 or 0 end,
    HKEYS = function(k)
        local out = {}
        for f in pairs(store[k] and store[k].h or {}) do out[#out + 1] = f end
        return out
    end,
    HLEN = function(k)
        local count = 0
        for _ in pairs(store[k] and store[k].h or {}) do count = count + 1 end
        return count
    end,
    EXISTS = function(k) return store[k] and 1 or 0 end,
    SET = function(k, v)
        store[k] = { t = 'string', v = v }
        return { ok = 'OK' }
    end,
    XADD = function(k)
        store[k] = store[k] or { t = 'stream', n = 0 }
        store[k].n = store[k].n + 1
        return '1-' .. store[k].n
    end,
    PUBLISH = function() return 0 end,
    PUBSUB = function() return {} end,
}
local registered = {}
redis = {
    call = function(c, ...) return assert(commands[c], 'stand-in redis: no ' .. c)(...) end,
    pcall = function(c, ...) return assert(commands[c], 'stand-in redis: no ' .. c)(...) end,
    acl_check_cmd = function() return true end,
    register_function = function(a, f)
        if type(a) == 'table' then a, f = a.function_name, a.callback end
        registered[a] = f
    end,
}

local text = io.open(libFile):read('*a')
assert(loadstring("local FUNCTION_NAME = 'profiled' " .. text, '=lib'))()
local main = assert(registered.profiled, 'the library registered no function')
local keys = { '{bench}:limits', '{bench}:state', '{bench}:history', '{bench}:home', '{bench}:corrupt' }
local function call(args)
    local r = cmsgpack.unpack(main(keys, args))
    if r.err then error('the library refused: ' .. tostring(r.err) .. ': ' .. tostring(r.msg)) end
    return r
end
-- The bench's limits (tollgate-bench's: requests that never run out, a 60 s window).
call({ 'setLimits', '', '{bench}:', '100000', cmsgpack.pack({ provider = 'bench', reason = 'bench',
    limits = '{"bb":60000,"bc":900000,"h":100,"mh":600000,"r":1099511627776,"w":60000}' }), '' })
local admit = { 'admit', '', '{bench}:', '100000', cmsgpack.pack({ caller = 'bench', host = 'profile-host',
    pid = 4242, provider = 'bench', rid = 1, st = 1, wpid = 4242, wst = 1 }), '' }
for _ = 1, 200 do -- warm: the script's caches filled, the window's ring gone round
    tick = tick + 1
    assert(call(admit).admitted, 'the bench admission was refused')
end

local counts, total = {}, 0
local function charge(key)
    counts[key] = (counts[key] or 0) + 1
    total = total + 1
end
local function sample()
    for level = 2, 4 do
        local info = debug.getinfo(level, 'Sl')
        if not info then return end
        if info.source == '=lib' then
            if level > 2 then
                charge('calls at line ' .. info.currentline) -- in a stand-in
            elseif mode == 'line' then
                charge('line ' .. info.currentline)
            else
                charge('function at line ' .. info.linedefined)
            end
            return
        end
    end
end
if mode == 'calls' then
    debug.sethook(function()
        local info = debug.getinfo(2, 'S')
        if info.source == '=lib' then charge('function at line ' .. info.linedefined) end
    end, 'c')
else
    debug.sethook(sample, '', 100)
end
for _ = 1, n do
    tick = tick + 1
    main(keys, admit)
end
debug.sethook()

local rows = {}
for k, c in pairs(counts) do rows[#rows + 1] = { k, c } end
table.sort(rows, function(x, y) return x[2] > y[2] end)
-- One row per line: the figure, what it is charged to, the library line (for the runner to quote).
for i = 1, math.min(30, #rows) do
    local line = rows[i][1]:match('(%d+)$')
    local figure = mode == 'calls' and string.format('%.2f', rows[i][2] / n)
        or string.format('%.1f %%', 100 * rows[i][2] / total)
    print(figure .. '\t' .. rows[i][1] .. '\t' .. line)
end
