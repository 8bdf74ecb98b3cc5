-- THROTTLE.CHECK / THROTTLE.PEEK on one key.
-- KEYS[1] key; ARGV now|'' mode(check|peek) algo limit period burst cost
local key = KEYS[1]
local nh, nl, injected = clock(ARGV[1])
local L = newLimit(algoArg(ARGV[3]), pint(ARGV[4], 'limit'), pint(ARGV[5], 'period'), pint(ARGV[6], 'burst'))
local ch, cl = parse(ARGV[7], 'cost')
local s = load(key, nh, nl)
if ARGV[2] == 'peek' then
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
