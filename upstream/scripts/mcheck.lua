-- THROTTLE.MCHECK: all or nothing over several limits, as server/mcheck.go.
-- KEYS[1..n]; ARGV now|'' cost, then algo limit period burst per key.
local nh, nl, injected = clock(ARGV[1])
local n = #KEYS
if n < 1 or #ARGV ~= 2 + 4 * n then error({err = 'ERR wrong number of arguments for mcheck'}) end
local lims = {}
for i = 1, n do
  for j = 1, i - 1 do
    if KEYS[j] == KEYS[i] then error({err = 'ERR key named twice'}) end
  end
  local a = 2 + 4 * (i - 1)
  lims[i] = newLimit(algoArg(ARGV[a + 1]), pint(ARGV[a + 2], 'limit'), pint(ARGV[a + 3], 'period'),
    pint(ARGV[a + 4], 'burst'))
end
local ch, cl = parse(ARGV[2], 'cost')
if ch < 0 then errCost() end
local prev, ds = {}, {}
local denied = 0
local rth, rtl = 0, 0

-- undo puts back the states of the first m limits, which were consumed,
-- and replaces their decisions with their state as it stands.
local function undo(m)
  for i = 1, m do
    local nxt, th, tl, d = check(lims[i], prev[i][1], nh, nl, 0, 0)
    local cur = prev[i][2]
    save(KEYS[i], cur, prev[i][1], nh, nl, th, tl, injected)
    d[1], d[5] = {0, 1}, {0, 0}
    ds[i] = d
  end
end

-- step checks limit i: while nothing is denied it consumes (consumed
-- counts the limits written so far); after a denial it only evaluates.
local consumed = 0
local function step(i)
  local st = load(KEYS[i], nh, nl)
  local d
  if denied == 0 then
    local nxt, th, tl, dd = check(lims[i], st, nh, nl, ch, cl)
    d = dd
    if d[1][2] == 0 then
      denied = i
    else
      save(KEYS[i], st, nxt, nh, nl, th, tl, injected)
      local after = nxt
      if not sameState(st, nxt) and (le(th, tl, 0, 0) or sameState(nxt, zeroState())) then after = zeroState() end
      prev[i] = {st, after}
      consumed = i
    end
  else
    local _, _, _, dd = check(lims[i], st, nh, nl, ch, cl)
    d = dd
    if d[1][2] ~= 0 then
      local _, _, _, dz = check(lims[i], st, nh, nl, 0, 0)
      dz[1], dz[5] = {0, 1}, {0, 0}
      d = dz
    end
  end
  if d[1][2] == 0 and rth >= 0 and (d[5][1] < 0 or lt(rth, rtl, d[5][1], d[5][2])) then
    rth, rtl = d[5][1], d[5][2]
  end
  ds[i] = d
end

for i = 1, n do
  local ok, e = pcall(step, i)
  if not ok then
    undo(consumed)
    rethrow(e)
  end
end
local allowed = '1'
if denied > 0 then
  undo(consumed)
  allowed = '0'
end
local out = {allowed, fmt(rth, rtl)}
for i = 1, n do
  local r = decisionReply(ds[i])
  for j = 1, 5 do out[#out + 1] = r[j] end
end
return out
