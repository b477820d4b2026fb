#!lua name=tollgate_costs
-- The C side of the Redis home's admission, each part timed alone on a real server (issue 27;
-- run by bench/redisprofile.sh): the commands an admission sends from its script and the
-- MessagePack of the provider's state as the bench leaves it. Compared with what
-- bench/redisprofile.lua charges to the Lua instructions, this says where an admission's
-- server time goes. KEYS: the home's limits, state, history; ARGV: N, the provider.
local function perCall(n, f)
    local t0 = redis.call('TIME')
    for _ = 1, n do f() end
    local t1 = redis.call('TIME')
    return ((t1[1] - t0[1]) * 1e6 + (t1[2] - t0[2])) / n
end
redis.register_function('tollgate_costs', function(keys, args)
    local n, provider = tonumber(args[1]), args[2]
    local out = {}
    local function row(what, us) out[#out + 1] = string.format('| %s | %.2f |', what, us) end
    local empty = perCall(n, function() end)
    local raw = redis.call('HGET', keys[2], 'p:' .. provider)
    if not raw then return redis.error_reply('no state for ' .. provider .. ' in ' .. keys[2]) end
    local state = cmsgpack.unpack(raw)
    local acl = { { 'HSET', keys[2], 'f', 'v' }, { 'XADD', keys[3], 'MAXLEN', '~', '1', '*', 'e', 'v' },
        { 'HDEL', keys[2], 'f' }, { 'HSET', keys[2], 'f', 'v' }, { 'PUBLISH', 'c:w:x', '1' },
        { 'PUBLISH', 'c:changed', '1' } }
    local line = '{"t":1795745311000,"type":"admit","provider":"bench","caller":"bench","pid":4242,"fence":1}'
    row('TIME', perCall(n, function() redis.call('TIME') end) - empty)
    row('TYPE of the state and the history (preflight)', perCall(n, function()
        redis.call('TYPE', keys[2])
        redis.call('TYPE', keys[3])
    end) - empty)
    row('6 × redis.acl_check_cmd (preflight)', perCall(n, function()
        for _, c in ipairs(acl) do redis.acl_check_cmd(unpack(c)) end
    end) - empty)
    row('HSTRLEN + HGET of the limits', perCall(n, function()
        redis.call('HSTRLEN', keys[1], provider)
        redis.call('HGET', keys[1], provider)
    end) - empty)
    row('HGET of the state (' .. #raw .. ' bytes)', perCall(n, function() redis.call('HGET', keys[2], 'p:' .. provider) end) - empty)
    row('cmsgpack.pack of the state', perCall(n, function() cmsgpack.pack(state) end) - empty)
    row('cmsgpack.unpack of the state (the script keeps it decoded between calls)', perCall(n, function() cmsgpack.unpack(raw) end) - empty)
    row('HSET of the state', perCall(n, function() redis.call('HSET', keys[2], 'p:' .. provider, raw) end) - empty)
    row('XADD of one history line (MAXLEN ~)', perCall(n, function()
        redis.call('XADD', keys[3], 'MAXLEN', '~', '100000', '*', 'e', line)
    end) - empty)
    row('PUBLISH, no subscriber', perCall(n, function() redis.call('PUBLISH', 'c:changed', '1') end) - empty)
    return out
end)
