-- THROTTLE.RESERVE and THROTTLE.SETTLE (limits/reserve.go).
-- KEYS[1] key, KEYS[2] the reservation's record; ARGV now|'' mode ...
--   reserve: algo limit period estimate ttl -> the decision of a check of
--            estimate units; when admitted the record "80 estimate now exp"
--   settle:  algo limit period actual -> 1 if this call settled the
--            reservation (refunding or charging the difference), else 0
-- The caller names the record (its id is drawn by the client); an id
-- already in use is refused before anything is charged.
local key, rkey = KEYS[1], KEYS[2]
local nh, nl, injected = clock(ARGV[1])
local mode = ARGV[2]
local L = newLimit(algoArg(ARGV[3]), pint(ARGV[4], 'limit'), pint(ARGV[5], 'period'), {0, 0})
local xh, xl = parse(ARGV[6], 'cost')

if mode == 'reserve' then
  local th, tl = parse(ARGV[7], 'ttl')
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
