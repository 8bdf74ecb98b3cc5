-- throttlekit upstream library: the engine's algorithms on exact 64-bit
-- integers. Every script is the part of this file its operation uses
-- followed by one operation file: scripts.go cuts this file where a line
-- starts in column 0 (other than a comment or "end") and keeps the
-- definitions the operation names, directly or through others. So every
-- top-level function or local starts in column 0, its body is indented,
-- and a definition comes before its users.
--
-- Lua 5.1 numbers are doubles, exact only below 2^53, while the engine
-- works on int64 nanoseconds (now is about 2^60.6). So every int64 here is
-- a pair of doubles (h, l): h is the signed high word in [-2^31, 2^31), l
-- the unsigned low word in [0, 2^32), the value h*2^32 + l. Additions and
-- subtractions wrap at 64 bits as Go's do; 64x64 products are taken to 128
-- bits on 16-bit limbs (each partial product below 2^32, each column sum
-- below 2^35); divisions use a double estimate that never overshoots,
-- corrected with exact products, so every result equals the engine's.
-- Variables come in pairs named xh, xl.
--
-- Constants are written as literals: 4294967296 (2^32), 2147483648 (2^31),
-- 65536, 2147483647:4294967295 (MaxInt64) and the kinds 0 none, 1 gcra,
-- 2 token, 3 fixed, 4 sliding (engine.Kind). A script runs all of its part
-- of this file on every call, creating each function anew, and a function's
-- creation costs more for every local it captures: literals are captured by
-- none.

local floor = math.floor

local function fail(code, text)
  error({err = 'TKERR ' .. code .. ' ' .. text})
end

-- rethrow raises again an error caught by pcall. Redis turns an error
-- table into the string "user_script:N: <text>" inside pcall; this makes
-- it the reply "<text>" again.
local function rethrow(e)
  if type(e) == 'table' then error(e) end
  error({err = (string.gsub(tostring(e), '^user_script:%d+: ', ''))})
end

-- N converts an exact double (|v| < 2^53) to a pair.
local function N(v)
  local h = floor(v / 4294967296)
  return h, v - h * 4294967296
end

local function wrap(h)
  if h >= 2147483648 or h < -2147483648 then
    return (h + 2147483648) % 4294967296 - 2147483648
  end
  return h
end

local function add(ah, al, bh, bl)
  local l = al + bl
  if l >= 4294967296 then
    return wrap(ah + bh + 1), l - 4294967296
  end
  return wrap(ah + bh), l
end

local function sub(ah, al, bh, bl)
  local l = al - bl
  if l < 0 then
    return wrap(ah - bh - 1), l + 4294967296
  end
  return wrap(ah - bh), l
end

local function neg(ah, al)
  if al == 0 then
    return wrap(-ah), 0
  end
  return wrap(-ah - 1), 4294967296 - al
end

local function lt(ah, al, bh, bl)
  return ah < bh or (ah == bh and al < bl)
end

local function le(ah, al, bh, bl)
  return ah < bh or (ah == bh and al <= bl)
end

local function eq(ah, al, bh, bl)
  return ah == bh and al == bl
end

local function min(ah, al, bh, bl)
  if lt(bh, bl, ah, al) then
    return bh, bl
  end
  return ah, al
end

local function max(ah, al, bh, bl)
  if lt(ah, al, bh, bl) then
    return bh, bl
  end
  return ah, al
end

-- umul returns the 128-bit product of a and b read as unsigned 64-bit
-- integers (Go's bits.Mul64) as four 32-bit words, high first.
local function umul(ah, al, bh, bl)
  if ah < 0 then ah = ah + 4294967296 end
  if bh < 0 then bh = bh + 4294967296 end
  local a0 = al % 65536
  local a1 = (al - a0) / 65536
  local a2 = ah % 65536
  local a3 = (ah - a2) / 65536
  local b0 = bl % 65536
  local b1 = (bl - b0) / 65536
  local b2 = bh % 65536
  local b3 = (bh - b2) / 65536
  local c = a0 * b0
  local r0 = c % 65536
  c = (c - r0) / 65536 + a0 * b1 + a1 * b0
  local r1 = c % 65536
  c = (c - r1) / 65536 + a0 * b2 + a1 * b1 + a2 * b0
  local r2 = c % 65536
  c = (c - r2) / 65536 + a0 * b3 + a1 * b2 + a2 * b1 + a3 * b0
  local r3 = c % 65536
  c = (c - r3) / 65536 + a1 * b3 + a2 * b2 + a3 * b1
  local r4 = c % 65536
  c = (c - r4) / 65536 + a2 * b3 + a3 * b2
  local r5 = c % 65536
  c = (c - r5) / 65536 + a3 * b3
  local r6 = c % 65536
  local r7 = (c - r6) / 65536
  return r7 * 65536 + r6, r5 * 65536 + r4, r3 * 65536 + r2, r1 * 65536 + r0
end

-- mul is Go's wrapping int64 product. Operands in [0, 2^53) multiply as
-- doubles when the rounded product is below 2^53: rounding is monotonic and
-- 2^53 a double, so the exact product is below it too, and exact.
local function mul(ah, al, bh, bl)
  if ah >= 0 and bh >= 0 and ah < 2097152 and bh < 2097152 then
    local p = (ah * 4294967296 + al) * (bh * 4294967296 + bl)
    if p < 9007199254740992 then return N(p) end
  end
  local _, _, h, l = umul(ah, al, bh, bl)
  if h >= 2147483648 then h = h - 4294967296 end
  return h, l
end

-- udiv128 divides the unsigned 128-bit n3:n2:n1:n0 by the unsigned
-- 64-bit dh:dl (dh in [0, 2^32)), which must exceed n3:n2 (Go's
-- bits.Div64): it returns quotient and remainder as unsigned pairs. Each
-- round subtracts e*d for an estimate e that is at most the true quotient
-- (the double quotient shrunk by 2^-40, far more than its rounding
-- error), leaving a quotient about 2^-40 of the last: three or four rounds.
local function udiv128(n3, n2, n1, n0, dh, dl)
  local qh, ql = 0, 0
  local dd = dh * 4294967296 + dl
  while true do
    if n3 == 0 and n2 == 0 and (n1 < dh or (n1 == dh and n0 < dl)) then
      return qh, ql, n1, n0
    end
    local e = floor((((n3 * 4294967296 + n2) * 4294967296 + n1) * 4294967296 + n0) / dd * (1 - 2 ^ -40))
    if e < 1 then e = 1 end
    local eh = floor(e / 4294967296)
    local el = e - eh * 4294967296
    local p3, p2, p1, p0 = umul(eh, el, dh, dl)
    local b = 0
    n0 = n0 - p0
    if n0 < 0 then n0 = n0 + 4294967296; b = 1 else b = 0 end
    n1 = n1 - p1 - b
    if n1 < 0 then n1 = n1 + 4294967296; b = 1 else b = 0 end
    n2 = n2 - p2 - b
    if n2 < 0 then n2 = n2 + 4294967296; b = 1 else b = 0 end
    n3 = n3 - p3 - b
    ql = ql + el
    if ql >= 4294967296 then ql = ql - 4294967296; qh = qh + eh + 1 else qh = qh + eh end
  end
end

-- udiv divides unsigned 64-bit pairs (high words in [0, 2^32)), d > 0.
-- Operands below 2^52 divide as doubles and divisors below 2^21 word by
-- word, each corrected by its exact remainder; the rest go to udiv128.
local function udiv(ah, al, bh, bl)
  if ah < 1048576 and bh < 1048576 then
    local a = ah * 4294967296 + al
    local b = bh * 4294967296 + bl
    local q = floor(a / b)
    local r = a - q * b
    if r < 0 then q = q - 1; r = r + b elseif r >= b then q = q + 1; r = r - b end
    local qh = floor(q / 4294967296)
    local rh = floor(r / 4294967296)
    return qh, q - qh * 4294967296, rh, r - rh * 4294967296
  end
  if bh == 0 and bl < 2097152 then
    local qh = floor(ah / bl)
    local r = ah - qh * bl
    if r < 0 then qh = qh - 1; r = r + bl elseif r >= bl then qh = qh + 1; r = r - bl end
    local x = r * 4294967296 + al
    local ql = floor(x / bl)
    r = x - ql * bl
    if r < 0 then ql = ql - 1; r = r + bl elseif r >= bl then ql = ql + 1; r = r - bl end
    return qh, ql, 0, r
  end
  return udiv128(0, 0, ah, al, bh, bl)
end

-- div is Go's int64 division: the quotient truncated toward zero and the
-- remainder with the dividend's sign. b must not be 0.
local function div(ah, al, bh, bl)
  local an, bn = ah < 0, bh < 0
  local uh, ul, vh, vl = ah, al, bh, bl
  if an then uh, ul = neg(ah, al); if uh < 0 then uh = uh + 4294967296 end end
  if bn then vh, vl = neg(bh, bl); if vh < 0 then vh = vh + 4294967296 end end
  local qh, ql, rh, rl = udiv(uh, ul, vh, vl)
  if qh >= 2147483648 then qh = qh - 4294967296 end
  if an ~= bn then qh, ql = neg(qh, ql) end
  if an then rh, rl = neg(rh, rl) end
  return qh, ql, rh, rl
end

local function quo(ah, al, bh, bl)
  local qh, ql = div(ah, al, bh, bl)
  return qh, ql
end

-- ugeq reports whether the unsigned 64-bit value of the words x3:x2 is at
-- least the pair c read as unsigned (Go's hi >= uint64(c)).
local function ugeq(x3, x2, ch, cl)
  if ch < 0 then ch = ch + 4294967296 end
  return x3 > ch or (x3 == ch and x2 >= cl)
end

-- mulDiv is the engine's mulDiv: a*b/c floored, clamped to MaxInt64.
local function mulDiv(ah, al, bh, bl, ch, cl)
  local w3, w2, w1, w0 = umul(ah, al, bh, bl)
  if ugeq(w3, w2, ch, cl) then return 2147483647, 4294967295 end
  if ch < 0 then ch = ch + 4294967296 end
  local qh, ql = udiv128(w3, w2, w1, w0, ch, cl)
  if qh >= 2147483648 then return 2147483647, 4294967295 end
  return qh, ql
end

-- mulDivCeil is the engine's mulDivCeil: mulDiv rounded up.
local function mulDivCeil(ah, al, bh, bl, ch, cl)
  local w3, w2, w1, w0 = umul(ah, al, bh, bl)
  if ugeq(w3, w2, ch, cl) then return 2147483647, 4294967295 end
  local qh, ql = w1, w0
  if not (ch == 0 and cl == 1) then
    if ch < 0 then ch = ch + 4294967296 end
    local rh, rl
    qh, ql, rh, rl = udiv128(w3, w2, w1, w0, ch, cl)
    if rh ~= 0 or rl ~= 0 then
      ql = ql + 1
      if ql == 4294967296 then ql = 0; qh = (qh + 1) % 4294967296 end
    end
  end
  if qh >= 2147483648 then return 2147483647, 4294967295 end
  return qh, ql
end

local function floorDiv(ah, al, bh, bl)
  local qh, ql, rh, rl = div(ah, al, bh, bl)
  if rh < 0 then return sub(qh, ql, 0, 1) end
  return qh, ql
end

-- ceilMs converts epoch ns to epoch ms, rounding up.
local function ceilMs(h, l)
  local mh, ml, rh, rl = div(h, l, 0, 1000000)
  if rh > 0 or (rh == 0 and rl > 0) then return add(mh, ml, 0, 1) end
  return mh, ml
end

-- durMs converts a duration in ns to ms, rounding up; negatives give 0.
local function durMs(h, l)
  if h < 0 or (h == 0 and l == 0) then return 0, 0 end
  local sh, sl = add(h, l, 0, 999999)
  return quo(sh, sl, 0, 1000000)
end

-- parse reads a decimal int64 argument.
local function parse(s, what)
  if type(s) ~= 'string' then s = tostring(s) end
  local negative = string.sub(s, 1, 1) == '-'
  local d = s
  if negative then d = string.sub(s, 2) end
  local n = #d
  if n == 0 or n > 19 or not string.find(d, '^%d+$') or
      (n == 19 and d > (negative and '9223372036854775808' or '9223372036854775807')) then
    error({err = 'ERR ' .. what .. ' is not an integer or out of range'})
  end
  local h, l
  if n <= 15 then
    h, l = N(tonumber(d))
  else
    -- top*1e9 + low with top < 1e10: top = t1*2^16 + t0, and t1*1e9
    -- (below 2^48) times 2^16 splits into words without rounding.
    local top = tonumber(string.sub(d, 1, n - 9))
    local t0 = top % 65536
    local a = (top - t0) / 65536 * 1000000000
    local a0 = a % 65536
    local bh, bl = N(t0 * 1000000000 + tonumber(string.sub(d, n - 8)))
    h, l = add((a - a0) / 65536, a0 * 65536, bh, bl)
  end
  if negative then return neg(h, l) end
  return h, l
end

-- fmt formats an int64 pair in decimal. %d formats a double below 2^53
-- exactly (Lua 5.1 converts it to a C long) and costs less than %.0f.
local function fmt(h, l)
  if h >= -2097152 and h < 2097152 then
    return string.format('%d', h * 4294967296 + l)
  end
  local sign = ''
  if h < 0 then
    sign = '-'
    h, l = neg(h, l)
    if h < 0 then h = h + 4294967296 end
  end
  local qh, ql, _, r = udiv(h, l, 0, 1000000)
  return sign .. string.format('%d%06d', qh * 4294967296 + ql, r)
end

local function pint(s, what)
  return {parse(s, what)}
end

-- Engine error codes and texts (engine/errors.go).
local function errWrongType() error({err = 'WRONGTYPE key holds the state of another algorithm'}) end
local function errLimit() fail(2, 'limit must be positive') end
local function errPeriod() fail(3, 'period must be positive') end
local function errBurst() fail(4, 'burst must not be negative') end
local function errAlgo() fail(5, 'unknown algorithm') end
local function errRange() fail(6, 'parameters out of range') end
local function errCost() fail(7, 'cost must not be negative') end
local function errZeroRate() fail(9, 'zero rate') end
local function errNegRate() fail(10, 'count and period must not be negative') end
local function errQuantity() fail(11, 'quantity out of range') end

-- A state is {kind, ah, al, bh, bl}; the zero state is {0, 0, 0, 0, 0}.
local function zeroState() return {0, 0, 0, 0, 0} end

local function sameState(s, t)
  return s[1] == t[1] and s[2] == t[2] and s[3] == t[3] and s[4] == t[4] and s[5] == t[5]
end

-- A decision is {allowed, limit, remaining, resetAt, retryAfter}, each a
-- pair {h, l}.
local function decision(limH, limL)
  return {{0, 0}, {limH, limL}, {0, 0}, {0, 0}, {0, 0}}
end

local function decisionReply(d)
  return {fmt(d[1][1], d[1][2]), fmt(d[2][1], d[2][2]), fmt(d[3][1], d[3][2]),
    fmt(d[4][1], d[4][2]), fmt(d[5][1], d[5][2])}
end

-- newLimit validates a configuration as engine.NewLimit does. A limit is
-- {algo, limit pair, period pair, burst pair, interval pair}.
local function newLimit(algo, lim, per, bur)
  local lh, ll, ph, pl, bh, bl = lim[1], lim[2], per[1], per[2], bur[1], bur[2]
  if algo < 1 or algo > 4 then errAlgo() end
  if le(lh, ll, 0, 0) then errLimit() end
  if le(ph, pl, 0, 0) then errPeriod() end
  if bh < 0 then errBurst() end
  if bh == 0 and bl == 0 then bh, bl = lh, ll end
  local th, tl = quo(ph, pl, lh, ll)
  if algo == 1 or algo == 2 then
    if th == 0 and tl == 0 then errRange() end
    local w3, w2, w1, w0 = umul(th, tl, bh, bl)
    if w3 ~= 0 or w2 ~= 0 or w1 > 1073741824 or (w1 == 1073741824 and w0 > 0) then errRange() end
  elseif algo == 4 then
    if lt(0, 2147483648 - 1, lh, ll) then errRange() end
  end
  if lt(1073741824, 0, ph, pl) then errRange() end
  return {algo, {lh, ll}, {ph, pl}, {bh, bl}, {th, tl}}
end

local function rem(sh, sl, th, tl)
  if le(sh, sl, 0, 0) then return 0, 0 end
  return quo(sh, sl, th, tl)
end

-- gcra: A = theoretical arrival time (ns).
local function gcra(L, s, nh, nl, ch, cl)
  local th, tl = L[5][1], L[5][2]
  local bh, bl = L[4][1], L[4][2]
  local dh, dl = mul(th, tl, bh, bl)
  local tath, tatl = s[2], s[3]
  if s[1] == 0 or lt(tath, tatl, nh, nl) then tath, tatl = nh, nl end
  local d = decision(bh, bl)
  local xh, xl = sub(tath, tatl, nh, nl)
  if lt(bh, bl, ch, cl) then
    d[5] = {-1, 4294967296 - 1}
    local rh, rl = sub(dh, dl, xh, xl)
    d[3] = {rem(rh, rl, th, tl)}
    d[4] = {ceilMs(tath, tatl)}
    return s, xh, xl, d
  end
  local ih, il = mul(th, tl, ch, cl)
  local nth, ntl = add(tath, tatl, ih, il)
  local yh, yl = sub(nth, ntl, nh, nl)
  if lt(dh, dl, yh, yl) then
    local rh, rl = sub(dh, dl, xh, xl)
    d[3] = {rem(rh, rl, th, tl)}
    d[4] = {ceilMs(tath, tatl)}
    local zh, zl = sub(nth, ntl, dh, dl)
    d[5] = {durMs(sub(zh, zl, nh, nl))}
    return s, xh, xl, d
  end
  d[1] = {0, 1}
  local rh, rl = sub(dh, dl, yh, yl)
  d[3] = {rem(rh, rl, th, tl)}
  d[4] = {ceilMs(nth, ntl)}
  if ch == 0 and cl == 0 then
    if s[1] == 0 then return s, 0, 0, d end
    local ah, al = sub(s[2], s[3], nh, nl)
    return s, ah, al, d
  end
  return {1, nth, ntl, 0, 0}, yh, yl, d
end

-- rate is the token bucket's refill rate as n tokens per p ns.
local function rate(L)
  local th, tl = L[5][1], L[5][2]
  local w3, w2, w1, w0 = umul(th, tl, L[2][1], L[2][2])
  local ph, pl = L[3][1], L[3][2]
  if w3 == 0 and w2 == 0 and w1 == ph and w0 == pl then
    return 0, 1, th, tl
  end
  return L[2][1], L[2][2], ph, pl
end

-- token: A = tokens held at time B (ns).
local function token(L, s, nh, nl, ch, cl)
  local kh, kl = L[4][1], L[4][2] -- capacity
  local rnh, rnl, rph, rpl = rate(L)
  local lvh, lvl, lah, lal = kh, kl, nh, nl
  if s[1] == 2 then
    lvh, lvl = min(kh, kl, max(s[2], s[3], 0, 0))
    lah, lal = s[4], s[5]
    if lt(lah, lal, nh, nl) then
      local eh, el = sub(nh, nl, lah, lal)
      local adh, adl = mulDiv(eh, el, rnh, rnl, rph, rpl)
      local fh, fl = sub(kh, kl, lvh, lvl)
      if le(fh, fl, adh, adl) then
        lvh, lvl, lah, lal = kh, kl, nh, nl
      elseif lt(0, 0, adh, adl) then
        lvh, lvl = add(lvh, lvl, adh, adl)
        lah, lal = add(lah, lal, mulDivCeil(adh, adl, rph, rpl, rnh, rnl))
      end
    end
  end
  local function full(vh, vl, ah, al)
    if le(kh, kl, vh, vl) then return 0, 0 end
    local gh, gl = sub(kh, kl, vh, vl)
    local xh, xl = add(ah, al, mulDivCeil(gh, gl, rph, rpl, rnh, rnl))
    return sub(xh, xl, nh, nl)
  end
  local d = decision(kh, kl)
  if lt(kh, kl, ch, cl) then d[5] = {-1, 4294967296 - 1} end
  if lt(lvh, lvl, ch, cl) or lt(kh, kl, ch, cl) then
    d[3] = {lvh, lvl}
    local fh, fl = full(lvh, lvl, lah, lal)
    d[4] = {ceilMs(add(nh, nl, fh, fl))}
    if le(ch, cl, kh, kl) then
      local gh, gl = sub(ch, cl, lvh, lvl)
      local xh, xl = add(lah, lal, mulDivCeil(gh, gl, rph, rpl, rnh, rnl))
      d[5] = {durMs(sub(xh, xl, nh, nl))}
    end
    if s[1] == 0 then return s, fh, fl, d end
    return {2, lvh, lvl, lah, lal}, fh, fl, d
  end
  d[1] = {0, 1}
  lvh, lvl = sub(lvh, lvl, ch, cl)
  d[3] = {lvh, lvl}
  local fh, fl = full(lvh, lvl, lah, lal)
  d[4] = {ceilMs(add(nh, nl, fh, fl))}
  if ch == 0 and cl == 0 and s[1] == 0 then return s, 0, 0, d end
  return {2, lvh, lvl, lah, lal}, fh, fl, d
end

-- window returns the end of the fixed window a request at now counts in
-- and the units used in it.
local function window(L, s, nh, nl)
  local ph, pl = L[3][1], L[3][2]
  local qh, ql = floorDiv(nh, nl, ph, pl)
  qh, ql = add(qh, ql, 0, 1)
  local eh, el = mul(qh, ql, ph, pl)
  if s[1] == 3 and le(eh, el, s[2], s[3]) then
    local uh, ul = max(s[4], s[5], 0, 0)
    uh, ul = min(uh, ul, L[2][1], L[2][2])
    return s[2], s[3], uh, ul
  end
  return eh, el, 0, 0
end

-- fixed: A = end of the window (ns), B = units used in it.
local function fixed(L, s, nh, nl, ch, cl)
  local lh, ll = L[2][1], L[2][2]
  local eh, el, uh, ul = window(L, s, nh, nl)
  local d = decision(lh, ll)
  d[4] = {ceilMs(eh, el)}
  local tth, ttl = sub(eh, el, nh, nl)
  if lt(lh, ll, ch, cl) then d[5] = {-1, 4294967296 - 1} end
  local rh, rl = sub(lh, ll, uh, ul)
  if lt(rh, rl, ch, cl) then
    d[3] = {rh, rl}
    if le(ch, cl, lh, ll) then d[5] = {durMs(tth, ttl)} end
    return s, tth, ttl, d
  end
  d[1] = {0, 1}
  d[3] = {sub(rh, rl, ch, cl)}
  if ch == 0 and cl == 0 then return s, tth, ttl, d end
  return {3, eh, el, add(uh, ul, ch, cl)}, tth, ttl, d
end

-- windowIndex is floorDiv(now, p) with the engine's shortcut (same result).
local function windowIndex(nh, nl, ph, pl, ah, al)
  local w3, w2, w1, w0 = umul(ah, al, ph, pl)
  if w3 == 0 and w2 == 0 and w1 < 2147483648 and le(w1, w0, nh, nl) then
    local oh, ol = sub(nh, nl, w1, w0)
    if lt(oh, ol, ph, pl) then return ah, al end
    local xh, xl = sub(oh, ol, ph, pl)
    if lt(xh, xl, ph, pl) then return add(ah, al, 0, 1) end
  end
  return floorDiv(nh, nl, ph, pl)
end

-- slidingRetry returns ns from now until cost units fit.
local function slidingRetry(L, wh, wl, nh, nl, prev, cur, ch, cl)
  local ph, pl = L[3][1], L[3][2]
  local lh, ll = L[2][1], L[2][2]
  local rh, rl = sub(lh, ll, N(cur))
  rh, rl = sub(rh, rl, ch, cl)
  if rh >= 0 and prev > 0 then
    local eh, el = sub(ph, pl, mulDiv(rh, rl, ph, pl, N(prev)))
    local xh, xl = mul(wh, wl, ph, pl)
    xh, xl = add(xh, xl, eh, el)
    return sub(xh, xl, nh, nl)
  end
  rh, rl = sub(lh, ll, ch, cl)
  local eh, el = sub(ph, pl, mulDiv(rh, rl, ph, pl, N(cur)))
  if eh < 0 then eh, el = 0, 0 end
  local xh, xl = add(wh, wl, 0, 1)
  xh, xl = mul(xh, xl, ph, pl)
  xh, xl = add(xh, xl, eh, el)
  return sub(xh, xl, nh, nl)
end

-- sliding: A = window index, B = previous count << 32 | current count.
-- Both counts are below 2^32, so they are plain doubles here.
local function sliding(L, s, nh, nl, ch, cl)
  local ph, pl = L[3][1], L[3][2]
  local lh, ll = L[2][1], L[2][2]
  local wh, wl
  local prev, cur = 0, 0
  if s[1] == 4 then
    wh, wl = windowIndex(nh, nl, ph, pl, s[2], s[3])
    local sp = s[4]
    if sp < 0 then sp = sp + 4294967296 end
    local sc = s[5]
    if eq(s[2], s[3], wh, wl) then
      prev, cur = sp, sc
    elseif eq(s[2], s[3], sub(wh, wl, 0, 1)) then
      prev = sc
    elseif lt(wh, wl, s[2], s[3]) then
      wh, wl, prev, cur = s[2], s[3], sp, sc
    end
  else
    wh, wl = floorDiv(nh, nl, ph, pl)
  end
  local eh, el = sub(nh, nl, mul(wh, wl, ph, pl))
  if eh < 0 then eh, el = 0, 0 end
  local xh, xl = sub(ph, pl, eh, el)
  local wph, wpl = mulDivCeil(0, prev, xh, xl, ph, pl)
  local uh, ul = add(0, cur, wph, wpl)
  local d = decision(lh, ll)
  local endh, endl
  if cur > 0 then
    endh, endl = add(wh, wl, 0, 2)
    endh, endl = mul(endh, endl, ph, pl)
  elseif prev > 0 then
    endh, endl = add(wh, wl, 0, 1)
    endh, endl = mul(endh, endl, ph, pl)
  else
    endh, endl = nh, nl
  end
  if lt(lh, ll, ch, cl) then d[5] = {-1, 4294967296 - 1} end
  local rh, rl = sub(lh, ll, uh, ul)
  if lt(rh, rl, ch, cl) then
    d[3] = {max(0, 0, rh, rl)}
    d[4] = {ceilMs(endh, endl)}
    if le(ch, cl, lh, ll) then
      d[5] = {durMs(slidingRetry(L, wh, wl, nh, nl, prev, cur, ch, cl))}
    end
    local th, tl = sub(endh, endl, nh, nl)
    return s, th, tl, d
  end
  d[1] = {0, 1}
  d[3] = {sub(rh, rl, ch, cl)}
  if ch == 0 and cl == 0 then
    d[4] = {ceilMs(endh, endl)}
    local th, tl = sub(endh, endl, nh, nl)
    return s, th, tl, d
  end
  endh, endl = add(wh, wl, 0, 2)
  endh, endl = mul(endh, endl, ph, pl)
  d[4] = {ceilMs(endh, endl)}
  local th, tl = sub(endh, endl, nh, nl)
  local kh, kl = add(0, cur, ch, cl)
  -- prev<<32 | (cur+cost), as Go computes it on the 64-bit words
  local bh = bit.bor(prev % 4294967296, kh % 4294967296)
  return {4, wh, wl, bh, kl}, th, tl, d
end

local algos = {gcra, token, fixed, sliding}

local function run(L, s, nh, nl, ch, cl)
  return algos[L[1]](L, s, nh, nl, ch, cl)
end

-- check is engine.Limit.Check: it returns next state, ttl pair, decision.
local function check(L, s, nh, nl, ch, cl)
  if s[1] ~= 0 and s[1] ~= L[1] then errWrongType() end
  if ch < 0 then errCost() end
  if ch == 0 and cl == 0 then
    local _, _, _, one = run(L, s, nh, nl, 0, 1)
    local _, th, tl, d = run(L, s, nh, nl, 0, 0)
    d[1], d[5] = one[1], one[5]
    if d[3][1] < 0 then d[3] = {0, 0} end
    return s, th, tl, d
  end
  return run(L, s, nh, nl, ch, cl)
end

-- Storage. A key holds a string "kind A B exp": the state and the instant
-- (ns) it expires at, so a state read at now counts only while exp > now,
-- whichever clock Redis's own PEXPIREAT (ceil(exp) in ms) follows.
local function load(key, nh, nl)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then
    if v.err and string.sub(v.err, 1, 9) == 'WRONGTYPE' then errWrongType() end
    error(v)
  end
  if not v then return zeroState(), false end
  local k, a, b, e = string.match(v, '^(%d) (%-?%d+) (%-?%d+) (%-?%d+)$')
  if not k then errWrongType() end
  local eh, el = parse(e, 'stored expiry')
  if le(eh, el, nh, nl) then return zeroState(), true end
  local ah, al = parse(a, 'stored state')
  local bh, bl = parse(b, 'stored state')
  return {tonumber(k), ah, al, bh, bl}, true
end

-- save stores next as the store's Apply does: unchanged means untouched,
-- a ttl <= 0 or the zero state removes the key, anything else is kept
-- until now+ttl (saturating).
local function save(key, cur, nxt, nh, nl, th, tl, injected)
  if sameState(cur, nxt) then return end
  if le(th, tl, 0, 0) or sameState(nxt, zeroState()) then
    redis.call('DEL', key)
    return
  end
  local eh, el = add(nh, nl, th, tl)
  if lt(eh, el, nh, nl) then eh, el = 2147483647, 4294967295 end
  local v = nxt[1] .. ' ' .. fmt(nxt[2], nxt[3]) .. ' ' .. fmt(nxt[4], nxt[5]) .. ' ' .. fmt(eh, el)
  if injected then
    redis.call('SET', key, v)
  else
    redis.call('SET', key, v, 'PXAT', fmt(ceilMs(eh, el)))
  end
end

-- clock returns now and whether it was injected: the ARGV value, or the
-- server's TIME when it is empty, so every caller of one upstream uses one
-- clock. Redis expires keys by its own clock, so with an injected clock
-- (tests) save sets no Redis expiry and the stored exp alone decides.
local function clock(arg)
  if arg ~= '' then
    local h, l = parse(arg, 'now')
    return h, l, true
  end
  local t = redis.call('TIME')
  local sh, sl = N(tonumber(t[1]))
  local xh, xl = mul(sh, sl, 0, 1000000000)
  local h, l = add(xh, xl, N(tonumber(t[2]) * 1000))
  return h, l, false
end

if redis.replicate_commands then redis.replicate_commands() end

local function algoArg(s)
  local a = ({gcra = 1, token = 2, fixed = 3, sliding = 4})[s]
  if not a then errAlgo() end
  return a
end

-- Leases (engine/lease.go).
local function lease(L, s, nh, nl, gh, gl)
  if s[1] ~= 0 and s[1] ~= 3 then errWrongType() end
  if gh < 0 then errCost() end
  local lh, ll = L[2][1], L[2][2]
  local eh, el, uh, ul = window(L, s, nh, nl)
  local rh, rl = sub(lh, ll, uh, ul)
  local kh, kl = min(gh, gl, rh, rl)
  local d = decision(lh, ll)
  d[1] = {kh, kl}
  d[3] = {sub(rh, rl, kh, kl)}
  d[4] = {ceilMs(eh, el)}
  local tth, ttl = sub(eh, el, nh, nl)
  if kh == 0 and kl == 0 then
    if lt(0, 0, gh, gl) then d[5] = {durMs(tth, ttl)} end
    return s, tth, ttl, d
  end
  return {3, eh, el, add(uh, ul, kh, kl)}, tth, ttl, d
end

-- giveBack is engine.Return: next state, ttl and the credits accepted.
local function giveBack(s, nh, nl, ch, cl, rh, rl)
  if s[1] ~= 0 and s[1] ~= 3 then errWrongType() end
  if ch < 0 then errCost() end
  if s[1] == 0 or le(s[2], s[3], nh, nl) then return s, 0, 0, 0, 0 end
  local tth, ttl = sub(s[2], s[3], nh, nl)
  local mh, ml = ceilMs(s[2], s[3])
  if not eq(mh, ml, rh, rl) then return s, tth, ttl, 0, 0 end
  local ah, al = min(ch, cl, max(s[4], s[5], 0, 0))
  return {3, s[2], s[3], sub(s[4], s[5], ah, al)}, tth, ttl, ah, al
end

-- CL.THROTTLE (engine/cell.go).
local function newCell(mb, count, per)
  if count[1] < 0 or per[1] < 0 then errNegRate() end
  if (count[1] == 0 and count[2] == 0) or (per[1] == 0 and per[2] == 0) then errZeroRate() end
  if mb[1] < 0 then errBurst() end
  local mph, mpl = N(9223372036)
  if lt(mph, mpl, per[1], per[2]) or eq(mb[1], mb[2], 2147483647, 4294967295) then errRange() end
  local xh, xl = mul(per[1], per[2], 0, 1000000000)
  local f = (xh * 4294967296 + xl) / (count[1] * 4294967296 + count[2])
  local th, tl = N(floor(f))
  if th == 0 and tl == 0 then errZeroRate() end
  local limh, liml = add(mb[1], mb[2], 0, 1)
  local qh, ql = quo(2147483647, 4294967295, th, tl)
  if lt(qh, ql, limh, liml) then errRange() end
  return {th, tl, limh, liml}
end

local function cellSecs(h, l)
  local sh, sl, rh, rl = div(h, l, 0, 1000000000)
  if rh > 0 or (rh == 0 and rl >= 1000000) then return add(sh, sl, 0, 1) end
  return sh, sl
end

local function cellRemaining(nh, nl, th, tl)
  if th >= 0 and not (th == 0 and tl == 0) and (nh > -2097152 or (nh == -2097152 and nl > 0)) and nh < 2097152 then
    return quo(nh, nl, th, tl)
  end
  local f = (nh * 4294967296 + nl) / (th * 4294967296 + tl)
  if f ~= f then return 0, 0 end
  if f >= 2 ^ 63 then return 2147483647, 4294967295 end
  if f <= -2 ^ 63 then return -2147483648, 0 end
  if f >= 0 then return N(floor(f)) end
  return N(-floor(-f))
end

local function mulOverflows(th, tl, qh, ql)
  local w3, w2, w1 = umul(th, tl, qh, ql)
  if w3 >= 2147483648 then w3 = w3 - 4294967296 end
  if qh < 0 then w3, w2 = sub(w3, w2, th, tl) end
  if w1 >= 2147483648 then return not eq(w3, w2, -1, 4294967296 - 1) end
  return not eq(w3, w2, 0, 0)
end

local function throttle(C, s, nh, nl, qh, ql)
  if s[1] ~= 0 and s[1] ~= 1 then errWrongType() end
  local th, tl, limh, liml = C[1], C[2], C[3], C[4]
  local dh, dl = mul(th, tl, limh, liml)
  local ih, il = mul(th, tl, qh, ql)
  if not (qh == 0 and ql == 0) and mulOverflows(th, tl, qh, ql) then errQuantity() end
  local tath, tatl = nh, nl
  if s[1] == 1 then tath, tatl = s[2], s[3] end
  local nth, ntl = add(tath, tatl, ih, il)
  if lt(tath, tatl, nh, nl) then nth, ntl = add(nh, nl, ih, il) end
  local xh, xl = sub(nth, ntl, dh, dl)
  local fh, fl = sub(nh, nl, xh, xl)
  local limited = 0
  local tth, ttl
  local rth, rtl = -1, 4294967296 - 1
  local nxt = s
  if fh < 0 then
    if le(ih, il, dh, dl) then rth, rtl = cellSecs(neg(fh, fl)) end
    limited = 1
    tth, ttl = sub(tath, tatl, nh, nl)
  else
    if lt(nth, ntl, nh, nl) then nth, ntl = nh, nl end
    tth, ttl = sub(nth, ntl, nh, nl)
    nxt = {1, nth, ntl, 0, 0}
  end
  local remh, reml = 0, 0
  local mh, ml = sub(dh, dl, tth, ttl)
  local ngh, ngl = neg(th, tl)
  if lt(ngh, ngl, mh, ml) then
    local ah, al = quo(mh, ml, 0, 1000)
    remh, reml = cellRemaining(ah, al, quo(th, tl, 0, 1000))
  end
  local sh, sl = cellSecs(tth, ttl)
  return nxt, tth, ttl, {tostring(limited), fmt(limh, liml), fmt(remh, reml), fmt(rth, rtl), fmt(sh, sl)}
end

-- satAdd is the engine's satAdd: a+b for b >= 0, saturating at MaxInt64.
local function satAdd(ah, al, bh, bl)
  local sh, sl = add(ah, al, bh, bl)
  if lt(sh, sl, ah, al) then return 2147483647, 4294967295 end
  return sh, sl
end

-- satMul is the engine's satMul: a*b for a, b >= 0, saturating at MaxInt64.
local function satMul(ah, al, bh, bl)
  local w3, w2, w1, w0 = umul(ah, al, bh, bl)
  if w3 ~= 0 or w2 ~= 0 or w1 >= 2147483648 then return 2147483647, 4294967295 end
  return w1, w0
end

-- Records of the admission operations (engine/ban.go's penalty box,
-- reservations) are strings "kind A B exp" like a state, kind in decimal.
-- loadRecord returns nil for an absent or expired record, or one in
-- another format.
local function loadRecord(key, nh, nl)
  local v = redis.call('GET', key)
  if not v then return nil end
  local k, a, b, e = string.match(v, '^(%d+) (%-?%d+) (%-?%d+) (%-?%d+)$')
  if not k then return nil end
  local eh, el = parse(e, 'stored expiry')
  if le(eh, el, nh, nl) then return nil end
  local ah, al = parse(a, 'stored record')
  local bh, bl = parse(b, 'stored record')
  return {tonumber(k), ah, al, bh, bl}
end

-- saveRecord stores rec until now+ttl (saturating); a ttl <= 0 removes it,
-- as the store's Apply does.
local function saveRecord(key, rec, nh, nl, th, tl, injected)
  if le(th, tl, 0, 0) then
    redis.call('DEL', key)
    return
  end
  local eh, el = satAdd(nh, nl, th, tl)
  local v = rec[1] .. ' ' .. fmt(rec[2], rec[3]) .. ' ' .. fmt(rec[4], rec[5]) .. ' ' .. fmt(eh, el)
  if injected then
    redis.call('SET', key, v)
  else
    redis.call('SET', key, v, 'PXAT', fmt(ceilMs(eh, el)))
  end
end

-- Forced charges and refunds (engine/charge.go), for THROTTLE.SETTLE.
-- ttlOf is the ttl of s at now: the one a peek of the algorithm reports.
local function ttlOf(L, s, nh, nl)
  if s[1] == 0 then return 0, 0 end
  local _, th, tl = run(L, s, nh, nl, 0, 0)
  return th, tl
end

local function adjustable(L, s, xh)
  if s[1] ~= 0 and s[1] ~= L[1] then errWrongType() end
  if xh < 0 then errCost() end
end

-- tokenAt is the bucket's level and time at now, refilled as token refills
-- it; a bucket in debt keeps its future time and level 0.
local function tokenAt(L, s, nh, nl)
  local kh, kl = L[4][1], L[4][2]
  if s[1] ~= 2 then return kh, kl, nh, nl end
  local rnh, rnl, rph, rpl = rate(L)
  local lvh, lvl = max(s[2], s[3], 0, 0)
  lvh, lvl = min(lvh, lvl, kh, kl)
  local lah, lal = s[4], s[5]
  if lt(lah, lal, nh, nl) then
    local eh, el = sub(nh, nl, lah, lal)
    local adh, adl = mulDiv(eh, el, rnh, rnl, rph, rpl)
    local fh, fl = sub(kh, kl, lvh, lvl)
    if le(fh, fl, adh, adl) then return kh, kl, nh, nl end
    if lt(0, 0, adh, adl) then
      lvh, lvl = add(lvh, lvl, adh, adl)
      lah, lal = add(lah, lal, mulDivCeil(adh, adl, rph, rpl, rnh, rnl))
    end
  end
  return lvh, lvl, lah, lal
end

-- slidingAt is the sliding window's index at now and its previous and
-- current counts (plain doubles), moved forward as sliding moves them.
local function slidingAt(L, s, nh, nl)
  local ph, pl = L[3][1], L[3][2]
  if s[1] ~= 4 then
    local wh, wl = floorDiv(nh, nl, ph, pl)
    return wh, wl, 0, 0
  end
  local wh, wl = windowIndex(nh, nl, ph, pl, s[2], s[3])
  local sp = s[4]
  if sp < 0 then sp = sp + 4294967296 end
  local mh, ml = sub(wh, wl, 0, 1)
  if eq(s[2], s[3], wh, wl) then return wh, wl, sp, s[5] end
  if eq(s[2], s[3], mh, ml) then return wh, wl, s[5], 0 end
  if lt(wh, wl, s[2], s[3]) then return s[2], s[3], sp, s[5] end
  return wh, wl, 0, 0
end

-- slidingState is {4, win, prev<<32 | cur} with its ttl at now.
local function slidingState(L, wh, wl, prev, cur, nh, nl)
  local nx = {4, wh, wl, wrap(prev), cur}
  return nx, ttlOf(L, nx, nh, nl)
end

-- charge is engine.Limit.Charge: x units (x >= 0) taken whether or not
-- they fit; it returns the next state and its ttl.
local function charge(L, s, nh, nl, xh, xl)
  adjustable(L, s, xh)
  if xh == 0 and xl == 0 then return s, ttlOf(L, s, nh, nl) end
  xh, xl = min(xh, xl, 0, 2147483648)
  local a = L[1]
  if a == 1 then
    local tath, tatl = s[2], s[3]
    if s[1] == 0 or lt(tath, tatl, nh, nl) then tath, tatl = nh, nl end
    tath, tatl = satAdd(tath, tatl, satMul(L[5][1], L[5][2], xh, xl))
    local th, tl = sub(tath, tatl, nh, nl)
    return {1, tath, tatl, 0, 0}, th, tl
  elseif a == 2 then
    local lvh, lvl, lah, lal = tokenAt(L, s, nh, nl)
    lvh, lvl = sub(lvh, lvl, xh, xl)
    if lvh < 0 then
      local rnh, rnl, rph, rpl = rate(L)
      local mh, ml = max(lah, lal, nh, nl)
      local gh, gl = neg(lvh, lvl)
      lah, lal = satAdd(mh, ml, mulDivCeil(gh, gl, rph, rpl, rnh, rnl))
      lvh, lvl = 0, 0
    end
    local nx = {2, lvh, lvl, lah, lal}
    return nx, ttlOf(L, nx, nh, nl)
  elseif a == 3 then
    local ph, pl = L[3][1], L[3][2]
    local qh, ql = floorDiv(nh, nl, ph, pl)
    qh, ql = add(qh, ql, 0, 1)
    local eh, el = mul(qh, ql, ph, pl)
    local uh, ul = 0, 0
    if s[1] == 3 and le(eh, el, s[2], s[3]) then
      eh, el = s[2], s[3]
      uh, ul = max(s[4], s[5], 0, 0)
    end
    local bh, bl = satAdd(uh, ul, xh, xl)
    local th, tl = sub(eh, el, nh, nl)
    return {3, eh, el, bh, bl}, th, tl
  end
  local wh, wl, prev, cur = slidingAt(L, s, nh, nl)
  cur = math.min(cur + xl, 2147483647)
  local nx = {4, wh, wl, wrap(prev), cur}
  local eh, el = add(wh, wl, 0, 2)
  eh, el = mul(eh, el, L[3][1], L[3][2])
  return nx, sub(eh, el, nh, nl)
end

-- refund is engine.Limit.Refund: x units (x >= 0) given back that a
-- charge at time at took; it returns the next state and its ttl.
local function refund(L, s, nh, nl, ath, atl, xh, xl)
  adjustable(L, s, xh)
  if (xh == 0 and xl == 0) or s[1] == 0 then return s, ttlOf(L, s, nh, nl) end
  xh, xl = min(xh, xl, 0, 2147483648)
  local a = L[1]
  if a == 1 then
    local ih, il = satMul(L[5][1], L[5][2], xh, xl)
    local tath, tatl = sub(s[2], s[3], ih, il)
    tath, tatl = max(tath, tatl, nh, nl)
    if le(tath, tatl, nh, nl) then return zeroState(), 0, 0 end
    return {1, tath, tatl, 0, 0}, sub(tath, tatl, nh, nl)
  elseif a == 2 then
    local lvh, lvl, lah, lal = tokenAt(L, s, nh, nl)
    local rnh, rnl, rph, rpl = rate(L)
    if lt(nh, nl, lah, lal) then
      local bh, bl = mulDiv(xh, xl, rph, rpl, rnh, rnl)
      local dh, dl = sub(lah, lal, bh, bl)
      if le(nh, nl, dh, dl) then
        lah, lal, xh, xl = dh, dl, 0, 0
      else
        local gh, gl = sub(lah, lal, nh, nl)
        xh, xl = sub(xh, xl, mulDiv(gh, gl, rnh, rnl, rph, rpl))
        lah, lal = nh, nl
      end
    end
    local mh, ml = max(xh, xl, 0, 0)
    lvh, lvl = add(lvh, lvl, mh, ml)
    lvh, lvl = min(lvh, lvl, L[4][1], L[4][2])
    local nx = {2, lvh, lvl, lah, lal}
    return nx, ttlOf(L, nx, nh, nl)
  elseif a == 3 then
    local sh, sl = sub(s[2], s[3], L[3][1], L[3][2])
    if le(s[2], s[3], nh, nl) or le(s[2], s[3], ath, atl) or lt(ath, atl, sh, sl) then
      return s, ttlOf(L, s, nh, nl)
    end
    local bh, bl = sub(s[4], s[5], xh, xl)
    bh, bl = max(bh, bl, 0, 0)
    return {3, s[2], s[3], bh, bl}, sub(s[2], s[3], nh, nl)
  end
  local wh, wl, prev, cur = slidingAt(L, s, nh, nl)
  local ah, al = floorDiv(ath, atl, L[3][1], L[3][2])
  local mh, ml = sub(wh, wl, 0, 1)
  if eq(ah, al, wh, wl) then
    cur = math.max(cur - xl, 0)
  elseif eq(ah, al, mh, ml) then
    prev = math.max(prev - xl, 0)
  else
    return s, ttlOf(L, s, nh, nl)
  end
  return slidingState(L, wh, wl, prev, cur, nh, nl)
end

-- mcheckKeys is THROTTLE.MCHECK over keys (distinct) and their limits lims:
-- cost ch,cl against every limit, all or nothing, as server/mcheck.go. It
-- returns the reply: allowed, retry-after, then five fields per key.
local function mcheckKeys(keys, lims, ch, cl, nh, nl, injected)
  if ch < 0 then errCost() end
  local n = #keys
  local prev, ds = {}, {}
  local denied = 0
  local rth, rtl = 0, 0

  -- undo puts back the states of the first m limits, which were consumed,
  -- and replaces their decisions with their state as it stands.
  local function undo(m)
    for i = 1, m do
      local nxt, th, tl, d = check(lims[i], prev[i][1], nh, nl, 0, 0)
      local cur = prev[i][2]
      save(keys[i], cur, prev[i][1], nh, nl, th, tl, injected)
      d[1], d[5] = {0, 1}, {0, 0}
      ds[i] = d
    end
  end

  -- step checks limit i: while nothing is denied it consumes (consumed
  -- counts the limits written so far); after a denial it only evaluates.
  local consumed = 0
  local function step(i)
    local st = load(keys[i], nh, nl)
    local d
    if denied == 0 then
      local nxt, th, tl, dd = check(lims[i], st, nh, nl, ch, cl)
      d = dd
      if d[1][2] == 0 then
        denied = i
      else
        save(keys[i], st, nxt, nh, nl, th, tl, injected)
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
end

-- The admission operations and GCRA, each a function that its own script
-- (slots.lua, ban.lua, reserve.lua, gcra.lua) and exec.lua call alike, so
-- a command gives the same reply alone and inside a transaction.

-- posArg parses an argument that must be above 0.
local function posArg(s, what)
  local h, l = parse(s, what)
  if le(h, l, 0, 0) then error({err = 'ERR ' .. what .. ' must be positive'}) end
  return h, l
end

-- slotKeep makes the slot hash key live past its latest slot expiry and
-- its last generation, and records the expiry eh:el.
local function slotKeep(key, eh, el, injected)
  local x = redis.call('HGET', key, 'x')
  if x then eh, el = max(eh, el, parse(x, 'stored expiry')) end
  redis.call('HSET', key, 'x', fmt(eh, el))
  if not injected then
    local gh, gl = parse(redis.call('HGET', key, 'g') or '0', 'stored generation')
    gh, gl = add(gh, gl, 0, 1)
    eh, el = max(eh, el, gh, gl)
    redis.call('PEXPIREAT', key, fmt(ceilMs(eh, el)))
  end
end

-- slotHeld returns the expiry of slot f of the hash key if generation
-- gh:gl holds it at now.
local function slotHeld(key, f, gh, gl, nh, nl)
  local v = redis.call('HGET', key, f)
  if not v then return nil end
  local g, e = string.match(v, '^(%-?%d+) (%-?%d+)$')
  if not g then return nil end
  local eh, el = parse(e, 'stored expiry')
  local hh, hl = parse(g, 'stored generation')
  if not eq(hh, hl, gh, gl) or le(eh, el, nh, nl) then return nil end
  return eh, el
end

-- slots is THROTTLE.ACQUIRE (mode 'acquire', a limit, b ttl), RELEASE
-- ('release', a slot, b generation) and REFRESH ('refresh', a slot, b
-- generation, c ttl) on the slot hash key; slots.lua describes the hash.
local function slots(key, nh, nl, injected, mode, a, b, c)
  if mode == 'acquire' then
    local limh, liml = posArg(a, 'limit')
    if limh ~= 0 or liml > 1024 then error({err = 'ERR limit must be an integer from 1 to 1024'}) end
    local th, tl = posArg(b, 'ttl')
    local all = redis.call('HGETALL', key)
    local live, n = {}, 0
    local fh, fl = 2147483647, 4294967295
    local gh, gl = 0, 0
    for i = 1, #all, 2 do
      local f, v = all[i], all[i + 1]
      if f == 'g' then
        gh, gl = parse(v, 'stored generation')
      elseif f ~= 'x' then
        local e = string.match(v, ' (%-?%d+)$')
        local eh, el = parse(e or '', 'stored expiry')
        if lt(nh, nl, eh, el) then
          live[tonumber(f)] = true
          n = n + 1
          fh, fl = min(fh, fl, eh, el)
        else
          redis.call('HDEL', key, f)
        end
      end
    end
    if n >= liml then
      return {'0', tostring(n), '0', '0', fmt(durMs(sub(fh, fl, nh, nl)))}
    end
    local slot = 0
    while live[slot] do slot = slot + 1 end
    gh, gl = add(gh, gl, 0, 1)
    gh, gl = max(gh, gl, nh, nl)
    gh, gl = max(gh, gl, 0, 1)
    local eh, el = satAdd(nh, nl, th, tl)
    local gen = fmt(gh, gl)
    redis.call('HSET', key, tostring(slot), gen .. ' ' .. fmt(eh, el), 'g', gen)
    slotKeep(key, eh, el, injected)
    return {'1', tostring(n + 1), tostring(slot), gen, '0'}
  end
  local sh, sl = parse(a, 'slot')
  if sh ~= 0 or sl >= 1024 then error({err = 'ERR slot out of range'}) end
  local f = tostring(sl)
  local gh, gl = parse(b, 'generation')
  if mode == 'release' then
    if not slotHeld(key, f, gh, gl, nh, nl) then return '0' end
    redis.call('HDEL', key, f)
    return '1'
  end
  if mode == 'refresh' then
    local th, tl = posArg(c, 'ttl')
    if not slotHeld(key, f, gh, gl, nh, nl) then return '0' end
    local eh, el = satAdd(nh, nl, th, tl)
    redis.call('HSET', key, f, fmt(gh, gl) .. ' ' .. fmt(eh, el))
    slotKeep(key, eh, el, injected)
    return '1'
  end
  error({err = 'ERR unknown slots mode'})
end

-- bannedFor is engine.BannedFor: ns left of the ban rec records at now.
local function bannedFor(rec, nh, nl)
  if not rec or rec[1] ~= 65 or le(rec[2], rec[3], nh, nl) then return 0, 0 end
  return sub(rec[2], rec[3], nh, nl)
end

-- banQuery is THROTTLE.BANNED (mode 'banned': ms left of the ban, 0 if
-- none) and THROTTLE.UNBAN ('unban': 1 if a ban was lifted, else 0) on
-- the ban record rkey.
local function banQuery(mode, rkey, nh, nl)
  if mode == 'banned' then
    return fmt(durMs(bannedFor(loadRecord(rkey, nh, nl), nh, nl)))
  end
  if mode == 'unban' then
    local lh, ll = bannedFor(loadRecord(rkey, nh, nl), nh, nl)
    redis.call('DEL', rkey)
    if lh == 0 and ll == 0 then return '0' end
    return '1'
  end
  error({err = 'ERR unknown ban mode'})
end

-- banCheck is THROTTLE.CHECK ... BAN on key with its ban record rkey; it
-- returns the decision reply.
local function banCheck(key, rkey, nh, nl, injected, algo, limit, period, burst, cost, threshold, duration)
  local L = newLimit(algoArg(algo), pint(limit, 'limit'), pint(period, 'period'), pint(burst, 'burst'))
  local ch, cl = parse(cost, 'cost')
  local bth, btl = parse(threshold, 'ban threshold')
  local bdh, bdl = parse(duration, 'ban duration')
  if le(bth, btl, 0, 0) or le(bdh, bdl, 0, 0) then error({err = 'ERR ban threshold must be positive'}) end
  local rec = loadRecord(rkey, nh, nl)
  local s = load(key, nh, nl)
  local lh, ll = bannedFor(rec, nh, nl)
  if lh ~= 0 or ll ~= 0 then
    local _, _, _, d = check(L, s, nh, nl, 0, 0)
    d[1], d[3], d[5] = {0, 0}, {0, 0}, {durMs(lh, ll)}
    return decisionReply(d)
  end
  local nxt, th, tl, d = check(L, s, nh, nl, ch, cl)
  if d[1][1] ~= 0 or d[1][2] ~= 0 then
    save(key, s, nxt, nh, nl, th, tl, injected)
  elseif lt(0, 0, ch, cl) then
    -- engine.Ban.Deny: count the denial; the threshold'th starts a ban.
    local kh, kl, eh, el = 0, 1, satAdd(nh, nl, L[3][1], L[3][2])
    if rec and rec[1] == 64 and lt(nh, nl, rec[4], rec[5]) then
      kh, kl = add(rec[2], rec[3], 0, 1)
      eh, el = rec[4], rec[5]
    end
    if le(bth, btl, kh, kl) then
      local uh, ul = satAdd(nh, nl, bdh, bdl)
      local uth, utl = sub(uh, ul, nh, nl)
      saveRecord(rkey, {65, uh, ul, 0, 0}, nh, nl, uth, utl, injected)
      if d[5][1] >= 0 then d[5] = {max(d[5][1], d[5][2], durMs(bdh, bdl))} end
    else
      local cth, ctl = sub(eh, el, nh, nl)
      saveRecord(rkey, {64, kh, kl, eh, el}, nh, nl, cth, ctl, injected)
    end
  end
  return decisionReply(d)
end

-- reservation is THROTTLE.RESERVE (mode 'reserve', x the estimate) and
-- THROTTLE.SETTLE ('settle', x the actual cost, ttl unused) on key with
-- the reservation's record rkey; reserve.lua describes both.
local function reservation(key, rkey, nh, nl, injected, mode, algo, limit, period, x, ttl)
  local L = newLimit(algoArg(algo), pint(limit, 'limit'), pint(period, 'period'), {0, 0})
  local xh, xl = parse(x, 'cost')
  if mode == 'reserve' then
    local th, tl = parse(ttl, 'ttl')
    if le(th, tl, 0, 0) then error({err = 'ERR ttl must be positive'}) end
    local s = load(key, nh, nl)
    local nxt, sth, stl, d = check(L, s, nh, nl, xh, xl)
    local admitted = d[1][1] ~= 0 or d[1][2] ~= 0
    if admitted and loadRecord(rkey, nh, nl) then error({err = 'TKDUP reservation id in use'}) end
    save(key, s, nxt, nh, nl, sth, stl, injected)
    if admitted then saveRecord(rkey, {80, xh, xl, nh, nl}, nh, nl, th, tl, injected) end
    return decisionReply(d)
  end
  if mode ~= 'settle' then error({err = 'ERR unknown reservation mode'}) end
  if xh < 0 then errCost() end
  local rec = loadRecord(rkey, nh, nl)
  if not rec or rec[1] ~= 80 then return '0' end
  local s = load(key, nh, nl)
  local nxt, th, tl = s, 0, 0
  if lt(rec[2], rec[3], xh, xl) then
    nxt, th, tl = charge(L, s, nh, nl, sub(xh, xl, rec[2], rec[3]))
  elseif lt(xh, xl, rec[2], rec[3]) then
    nxt, th, tl = refund(L, s, nh, nl, rec[4], rec[5], sub(rec[2], rec[3], xh, xl))
  end
  redis.call('DEL', rkey)
  save(key, s, nxt, nh, nl, th, tl, injected)
  return '1'
end

-- gcraSecs is C's ceil(us / 1e6) on a double: the pair read as a double
-- is Go's float64(int64) (one rounding of an exact sum), then the same
-- IEEE division and ceiling.
local function gcraSecs(h, l)
  return N(math.ceil((h * 4294967296 + l) / 1000000))
end

-- gcraTTL is the ns from now until a key whose TAT is tat us expires.
local function gcraTTL(tath, tatl, nh, nl)
  local mh, ml = quo(tath, tatl, 0, 1000)
  if le(2147, 2077252341, mh, ml) then return 2147483647, 4294967295 end
  mh, ml = add(mh, ml, 0, 1)
  mh, ml = mul(mh, ml, 0, 1000000)
  return sub(mh, ml, nh, nl)
end

-- rateGCRA is Redis's GCRA command (engine.RateGCRA.Apply) on key, on
-- microseconds: burst as Redis counts it, the emission interval in
-- microseconds and the cost of the call, as the server validated them
-- (engine.NewRateGCRA). It returns limited burst remaining retry_after_s
-- reset_after_s.
local function rateGCRA(key, nh, nl, injected, burst, interval, tokens)
  local bh, bl = parse(burst, 'burst')
  local th, tl = parse(interval, 'interval')
  local kh, kl = parse(tokens, 'tokens')
  if le(bh, bl, 0, 0) or le(th, tl, 0, 0) or le(kh, kl, 0, 0) then errRange() end
  local s = load(key, nh, nl)
  if s[1] ~= 0 and s[1] ~= 5 then errWrongType() end
  local qh, ql = quo(2147483647, 4294967295, kh, kl)
  if lt(qh, ql, th, tl) then fail(13, 'interval times tokens overflows') end
  qh, ql = quo(2147483647, 4294967295, bh, bl)
  if lt(qh, ql, th, tl) then fail(14, 'interval times burst overflows') end
  local uh, ul = floorDiv(nh, nl, 0, 1000000)
  uh, ul = mul(uh, ul, 0, 1000)
  local tath, tatl = uh, ul
  if s[1] == 5 then tath, tatl = s[2], s[3] end
  local vh, vl = mul(th, tl, bh, bl)
  local ih, il = mul(th, tl, kh, kl)
  local baseh, basel = max(uh, ul, tath, tatl)
  local rh, rl = sub(2147483647, 4294967295, baseh, basel)
  if lt(rh, rl, ih, il) then fail(13, 'interval times tokens overflows') end
  local xh, xl = add(baseh, basel, ih, il)
  local dh, dl = sub(uh, ul, sub(xh, xl, vh, vl))
  local limited, retryh, retryl = 0, -1, 4294967295
  local nxt, livh, livl = s, 0, 0
  local ttlh, ttll = 0, 0
  if dh < 0 then
    limited = 1
    if le(ih, il, vh, vl) then retryh, retryl = gcraSecs(neg(dh, dl)) end
    livh, livl = sub(tath, tatl, uh, ul)
    if s[1] == 5 then ttlh, ttll = gcraTTL(s[2], s[3], nh, nl) end
  else
    livh, livl = sub(xh, xl, uh, ul)
    nxt = {5, xh, xl, 0, 0}
    ttlh, ttll = gcraTTL(xh, xl, nh, nl)
  end
  local remh, reml = 0, 0
  local lefth, leftl = sub(vh, vl, livh, livl)
  local mth, mtl = neg(th, tl)
  if lt(mth, mtl, lefth, leftl) then remh, reml = quo(lefth, leftl, th, tl) end
  save(key, s, nxt, nh, nl, ttlh, ttll, injected)
  return {tostring(limited), fmt(bh, bl), fmt(remh, reml), fmt(retryh, retryl), fmt(gcraSecs(livh, livl))}
end

-- checkOrPeek is THROTTLE.CHECK (peek false) or THROTTLE.PEEK of ch,cl
-- units of L on key at now: check.lua's body, which exec.lua runs too.
local function checkOrPeek(key, L, ch, cl, peek, nh, nl, injected)
  local s = load(key, nh, nl)
  if peek then
    local _, _, _, d = check(L, s, nh, nl, 0, 0)
    if lt(0, 1, ch, cl) then
      local _, _, _, dc = check(L, s, nh, nl, ch, cl)
      d[1], d[5] = dc[1], dc[5]
    elseif ch < 0 then
      check(L, s, nh, nl, ch, cl)
    end
    return decisionReply(d)
  end
  local nxt, th, tl, d = check(L, s, nh, nl, ch, cl)
  save(key, s, nxt, nh, nl, th, tl, injected)
  return decisionReply(d)
end
