-- THROTTLE.RETURN of leased units of a GCRA, token-bucket or
-- sliding-window limit (leased mode, upstream/tier): the units are
-- un-charged, no more than the lease named by reset_at_ms can still be
-- worth (lease_algo.lua):
--   sliding: while the window the lease counted in is the key's current
--     one and ends at reset_at_ms, up to the window's current count;
--   gcra, token: up to the units the budget regains between now and
--     reset_at_ms less a millisecond (before that instant, which is before
--     the lease's own full instant, an unused unit of the lease is still
--     charged), and up to what the key holds charged now.
-- Why a gcra return is safe (token is the same on the instant its bucket
-- is full): let tat be the key's theoretical arrival time and tat' the one
-- it would have had without the c unused units of the lease, which left
-- it at L. Right after the lease tat - tat' = c*t. Every check maps both
-- by x -> max(x, now) + charge, which keeps the difference, or, once
-- tat' < now, makes it max(tat, now) - now >= L - now (tat never drops
-- below L but by a return). So at a return at now the difference is at
-- least min(c*t, L - now), and taking back min(c, (L - 1ms - now)/t)
-- units leaves tat at or above tat'.
-- KEYS[1] key; ARGV now|'' algo limit period burst credits reset_at_ms
-- Reply: the units taken back.
local key = KEYS[1]
local nh, nl, injected = clock(ARGV[1])
local a = algoArg(ARGV[2])
local L = newLimit(a, pint(ARGV[3], 'limit'), pint(ARGV[4], 'period'), pint(ARGV[5], 'burst'))
if a == 3 then errAlgo() end
local ch, cl = parse(ARGV[6], 'credits')
if ch < 0 then errCost() end
local rh, rl = parse(ARGV[7], 'reset_at_ms')
local s = load(key, nh, nl)
if s[1] ~= 0 and s[1] ~= a then errWrongType() end
if s[1] == 0 or (ch == 0 and cl == 0) then return '0' end
-- upto returns the instant (ns) before which a unit of the lease is still
-- charged: reset_at_ms less a millisecond, at most lim; nil when past.
local function upto(lim_h, lim_l)
  local mh, ml = ceilMs(nh, nl)
  if lt(rh, rl, mh, ml) then return nil end
  mh, ml = ceilMs(lim_h, lim_l)
  if lt(mh, ml, rh, rl) then return lim_h, lim_l end
  local xh, xl = sub(rh, rl, 0, 1)
  return mul(xh, xl, 0, 1000000)
end
local ah, al = 0, 0
local nxt, th, tl = s, 0, 0
if a == 4 then
  local ph, pl = L[3][1], L[3][2]
  local wh, wl = floorDiv(nh, nl, ph, pl)
  local eh, el = add(s[2], s[3], 0, 1)
  eh, el = ceilMs(mul(eh, el, ph, pl))
  if le(wh, wl, s[2], s[3]) and eq(eh, el, rh, rl) then
    ah, al = min(ch, cl, 0, s[5])
    nxt = {4, s[2], s[3], s[4], s[5] - al}
    nxt, th, tl = check(L, nxt, nh, nl, 0, 0)
  end
elseif a == 1 then
  local tvh, tvl = L[5][1], L[5][2]
  local fh, fl = upto(s[2], s[3])
  if fh and lt(nh, nl, fh, fl) and lt(nh, nl, s[2], s[3]) then
    local dh, dl = sub(fh, fl, nh, nl)
    ah, al = min(ch, cl, quo(dh, dl, tvh, tvl))
    dh, dl = sub(s[2], s[3], nh, nl)
    local xh, xl = quo(dh, dl, tvh, tvl)
    ah, al = min(ah, al, xh, xl)
    local nth, ntl = sub(s[2], s[3], mul(ah, al, tvh, tvl))
    nxt = {1, nth, ntl, 0, 0}
    th, tl = sub(nth, ntl, nh, nl)
  end
else
  local r, fh, fl = token(L, s, nh, nl, 0, 0)
  local uh, ul = add(nh, nl, fh, fl)
  uh, ul = upto(uh, ul)
  if uh and lt(nh, nl, uh, ul) then
    local rnh, rnl, rph, rpl = rate(L)
    local dh, dl = sub(uh, ul, nh, nl)
    ah, al = min(ch, cl, mulDiv(dh, dl, rnh, rnl, rph, rpl))
    ah, al = min(ah, al, sub(L[4][1], L[4][2], r[2], r[3]))
    nxt = {2, add(r[2], r[3], ah, al)}
    nxt[4], nxt[5] = r[4], r[5]
    nxt, th, tl = token(L, nxt, nh, nl, 0, 0)
  end
end
if ah == 0 and al == 0 then return '0' end
save(key, s, nxt, nh, nl, th, tl, injected)
return fmt(ah, al)
