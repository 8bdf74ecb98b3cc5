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
return mcheckKeys(KEYS, lims, ch, cl, nh, nl, injected)
