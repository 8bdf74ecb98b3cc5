-- EXEC over an upstream: a list of operations on keys of one hash slot,
-- run in order as one script, so that they take effect together. Each
-- item's reply is the one its own script (check.lua, lease.lua, ...) gives,
-- or its error, as in a Redis transaction, where a command that fails does
-- not stop the others.
-- KEYS[1..k] the distinct keys; ARGV now|'' count, then per item an op code
-- and its arguments, keys given as indexes into KEYS:
--   check|peek  key algo limit period burst cost
--   reset       key
--   lease       key limit period batch
--   return      key credits reset_at_ms
--   cell        key max_burst count_per_period period_sec quantity
--   mcheck      m cost, then key algo limit period burst m times
--   gcra        key burst interval_us tokens
--   acquire     slotkey limit ttl
--   release     slotkey slot gen
--   refresh     slotkey slot gen ttl
--   checkban    key bankey algo limit period burst cost threshold duration
--   banned      bankey
--   unban       bankey
--   reserve     key reckey algo limit period estimate ttl
--   settle      key reckey algo limit period actual
-- The admission items and gcra run lib.lua's functions, the bodies of
-- slots.lua, ban.lua, reserve.lua and gcra.lua (exec_admission.lua).
local nh, nl, injected = clock(ARGV[1])
local count = tonumber(ARGV[2])
if count == nil then error({err = 'ERR exec count is not an integer'}) end
local a = 3

-- arg returns the next argument.
local function arg()
  local v = ARGV[a]
  if v == nil then error({err = 'ERR wrong number of arguments for exec'}) end
  a = a + 1
  return v
end

-- keyArg returns the key the next argument indexes.
local function keyArg()
  local k = KEYS[tonumber(arg())]
  if k == nil then error({err = 'ERR exec key index out of range'}) end
  return k
end

-- opArgs gives, per operation that runs a lib.lua function, its number of
-- keys, its number of arguments (keys included) and the function run on
-- them. Here it is empty: the script a transaction holding an admission
-- operation or GCRA is sent as puts exec_admission.lua's table in its
-- place, so other transactions do not create those functions.
local opArgs = {}

-- run reads one item's arguments and returns the function that runs it.
-- Every item is read before any runs, so a malformed list runs nothing;
-- the values are checked when the item runs, as its own script checks
-- them, so a bad value fails that item alone.
local function run(op)
  if op == 'check' or op == 'peek' then
    local key = keyArg()
    local algo = arg()
    local limit = arg()
    local period = arg()
    local burst = arg()
    local cost = arg()
    return function()
      local L = newLimit(algoArg(algo), pint(limit, 'limit'), pint(period, 'period'), pint(burst, 'burst'))
      local ch, cl = parse(cost, 'cost')
      return checkOrPeek(key, L, ch, cl, op == 'peek', nh, nl, injected)
    end
  elseif op == 'reset' then
    local key = keyArg()
    return function()
      local live = 0
      local v = redis.pcall('GET', key)
      if type(v) == 'table' then
        live = 1
      elseif v then
        local e = string.match(v, ' (%-?%d+)$')
        if not e then
          live = 1
        else
          local eh, el = parse(e, 'stored expiry')
          if lt(nh, nl, eh, el) then live = 1 end
        end
      end
      redis.call('DEL', key)
      return tostring(live)
    end
  elseif op == 'lease' then
    local key = keyArg()
    local limit = arg()
    local period = arg()
    local batch = arg()
    return function()
      local L = newLimit(3, pint(limit, 'limit'), pint(period, 'period'), {0, 0})
      local gh, gl = parse(batch, 'batch')
      local s = load(key, nh, nl)
      local nxt, th, tl, d = lease(L, s, nh, nl, gh, gl)
      save(key, s, nxt, nh, nl, th, tl, injected)
      return decisionReply(d)
    end
  elseif op == 'return' then
    local key = keyArg()
    local credits = arg()
    local resetAt = arg()
    return function()
      local ch, cl = parse(credits, 'credits')
      local rh, rl = parse(resetAt, 'reset_at_ms')
      local s = load(key, nh, nl)
      local nxt, th, tl, ah, al = giveBack(s, nh, nl, ch, cl, rh, rl)
      save(key, s, nxt, nh, nl, th, tl, injected)
      return fmt(ah, al)
    end
  elseif op == 'cell' then
    local key = keyArg()
    local burst = arg()
    local cnt = arg()
    local period = arg()
    local qty = arg()
    return function()
      local C = newCell(pint(burst, 'max_burst'), pint(cnt, 'count'), pint(period, 'period'))
      local qh, ql = parse(qty, 'quantity')
      local s = load(key, nh, nl)
      local nxt, th, tl, r = throttle(C, s, nh, nl, qh, ql)
      save(key, s, nxt, nh, nl, th, tl, injected)
      return r
    end
  elseif op == 'mcheck' then
    local m = tonumber(arg())
    if m == nil or m < 1 then error({err = 'ERR wrong number of arguments for mcheck'}) end
    local cost = arg()
    local keys, specs = {}, {}
    for i = 1, m do
      keys[i] = keyArg()
      local sp = {}
      for j = 1, 4 do sp[j] = arg() end
      specs[i] = sp
    end
    return function()
      local lims = {}
      for i = 1, m do
        for j = 1, i - 1 do
          if keys[j] == keys[i] then error({err = 'ERR key named twice'}) end
        end
        local sp = specs[i]
        lims[i] = newLimit(algoArg(sp[1]), pint(sp[2], 'limit'), pint(sp[3], 'period'), pint(sp[4], 'burst'))
      end
      local ch, cl = parse(cost, 'cost')
      return mcheckKeys(keys, lims, ch, cl, nh, nl, injected)
    end
  end
  local spec = opArgs[op]
  if spec == nil then error({err = 'ERR unknown exec operation'}) end
  local v = {}
  for i = 1, spec[1] do v[i] = keyArg() end
  for i = spec[1] + 1, spec[2] do v[i] = arg() end
  return function() return spec[3](v) end
end

local items = {}
for i = 1, count do items[i] = run(arg()) end
if ARGV[a] ~= nil then error({err = 'ERR wrong number of arguments for exec'}) end
local out = {}
for i = 1, count do
  local ok, r = pcall(items[i])
  if ok then
    out[i] = r
  elseif type(r) == 'table' and r.err then
    out[i] = r
  else
    -- Redis turns an error table into "user_script:N: <text>" inside
    -- pcall (see rethrow): the item's reply is "<text>".
    out[i] = {err = (string.gsub(tostring(r), '^user_script:%d+: ', ''))}
  end
end
return out
