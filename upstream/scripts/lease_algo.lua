-- THROTTLE.LEASE of a GCRA, token-bucket or sliding-window limit (leased
-- mode, upstream/tier): min(batch, remaining) units charged at once, as a
-- check of that cost charges them (engine.Limit.Check), so the key's state
-- is one a check could have left.
-- KEYS[1] key; ARGV now|'' algo limit period burst batch
-- Reply: granted limit remaining reset_at_ms retry_after_ms, where
--   reset_at_ms is, for sliding, the end of the window the units count in
--   (ms, rounded up; they are spent before it), and for gcra and token the
--   instant the budget is full again after the grant (the check's
--   ResetAt), which a return names; retry_after_ms is 0 when the whole
--   batch was granted, else the wait until one more unit fits.
local key = KEYS[1]
local nh, nl, injected = clock(ARGV[1])
local a = algoArg(ARGV[2])
local L = newLimit(a, pint(ARGV[3], 'limit'), pint(ARGV[4], 'period'), pint(ARGV[5], 'burst'))
if a == 3 then errAlgo() end
local gh, gl = parse(ARGV[6], 'batch')
if gh < 0 then errCost() end
local s = load(key, nh, nl)
local _, _, _, d = check(L, s, nh, nl, 0, 0)
local kh, kl = min(gh, gl, d[3][1], d[3][2])
local nxt = s
if not (kh == 0 and kl == 0) then
  local th, tl, dc
  nxt, th, tl, dc = check(L, s, nh, nl, kh, kl)
  if dc[1][2] == 0 then
    kh, kl, nxt = 0, 0, s -- unreachable: remaining units always fit
  else
    save(key, s, nxt, nh, nl, th, tl, injected)
    _, _, _, d = check(L, nxt, nh, nl, 0, 0)
  end
end
local rth, rtl = 0, 0
if not eq(kh, kl, gh, gl) then rth, rtl = d[5][1], d[5][2] end
local resh, resl = d[4][1], d[4][2]
if a == 4 then
  local ph, pl = L[3][1], L[3][2]
  local wh, wl = floorDiv(nh, nl, ph, pl)
  if s[1] == 4 and lt(wh, wl, s[2], s[3]) then wh, wl = s[2], s[3] end
  wh, wl = add(wh, wl, 0, 1)
  resh, resl = ceilMs(mul(wh, wl, ph, pl))
end
return {fmt(kh, kl), fmt(d[2][1], d[2][2]), fmt(d[3][1], d[3][2]), fmt(resh, resl), fmt(rth, rtl)}
