-- GCRA: Redis's rate-limit command (engine.RateGCRA.Apply), on
-- microseconds. The server validated the arguments (engine.NewRateGCRA):
-- the burst as Redis counts it, the emission interval in microseconds and
-- the cost of the call.
-- KEYS[1] key; ARGV now|'' burst interval_us tokens
-- Reply: limited burst remaining retry_after_s reset_after_s.
local key = KEYS[1]
local nh, nl, injected = clock(ARGV[1])
local bh, bl = parse(ARGV[2], 'burst')
local th, tl = parse(ARGV[3], 'interval')
local kh, kl = parse(ARGV[4], 'tokens')
if le(bh, bl, 0, 0) or le(th, tl, 0, 0) or le(kh, kl, 0, 0) then errRange() end
local s = load(key, nh, nl)
if s[1] ~= 0 and s[1] ~= 5 then errWrongType() end
local function errTokens() fail(13, 'interval times tokens overflows') end
local qh, ql = quo(2147483647, 4294967295, kh, kl)
if lt(qh, ql, th, tl) then errTokens() end
qh, ql = quo(2147483647, 4294967295, bh, bl)
if lt(qh, ql, th, tl) then fail(14, 'interval times burst overflows') end
-- secs is C's ceil(us / 1e6) on a double: the pair read as a double is
-- Go's float64(int64) (one rounding of an exact sum), then the same IEEE
-- division and ceiling.
local function secs(h, l)
  return N(math.ceil((h * 4294967296 + l) / 1000000))
end
-- keyTTL is the ns from now until a key whose TAT is tat us expires.
local function keyTTL(tath, tatl)
  local mh, ml = quo(tath, tatl, 0, 1000)
  if le(2147, 2077252341, mh, ml) then return 2147483647, 4294967295 end
  mh, ml = add(mh, ml, 0, 1)
  mh, ml = mul(mh, ml, 0, 1000000)
  return sub(mh, ml, nh, nl)
end
local uh, ul = floorDiv(nh, nl, 0, 1000000)
uh, ul = mul(uh, ul, 0, 1000)
local tath, tatl = uh, ul
if s[1] == 5 then tath, tatl = s[2], s[3] end
local vh, vl = mul(th, tl, bh, bl)
local ih, il = mul(th, tl, kh, kl)
local baseh, basel = max(uh, ul, tath, tatl)
local rh, rl = sub(2147483647, 4294967295, baseh, basel)
if lt(rh, rl, ih, il) then errTokens() end
local xh, xl = add(baseh, basel, ih, il)
local dh, dl = sub(uh, ul, sub(xh, xl, vh, vl))
local limited, retryh, retryl = 0, -1, 4294967295
local nxt, livh, livl = s, 0, 0
local ttlh, ttll = 0, 0
if dh < 0 then
  limited = 1
  if le(ih, il, vh, vl) then retryh, retryl = secs(neg(dh, dl)) end
  livh, livl = sub(tath, tatl, uh, ul)
  if s[1] == 5 then ttlh, ttll = keyTTL(s[2], s[3]) end
else
  livh, livl = sub(xh, xl, uh, ul)
  nxt = {5, xh, xl, 0, 0}
  ttlh, ttll = keyTTL(xh, xl)
end
local remh, reml = 0, 0
local lefth, leftl = sub(vh, vl, livh, livl)
local mth, mtl = neg(th, tl)
if lt(mth, mtl, lefth, leftl) then remh, reml = quo(lefth, leftl, th, tl) end
save(key, s, nxt, nh, nl, ttlh, ttll, injected)
return {tostring(limited), fmt(bh, bl), fmt(remh, reml), fmt(retryh, retryl), fmt(secs(livh, livl))}
