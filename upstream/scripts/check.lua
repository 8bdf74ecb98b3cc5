-- THROTTLE.CHECK / THROTTLE.PEEK on one key.
-- KEYS[1] key; ARGV now|'' mode(check|peek) algo limit period burst cost
local key = KEYS[1]
local nh, nl, injected = clock(ARGV[1])
local L = newLimit(algoArg(ARGV[3]), pint(ARGV[4], 'limit'), pint(ARGV[5], 'period'), pint(ARGV[6], 'burst'))
local ch, cl = parse(ARGV[7], 'cost')
return checkOrPeek(key, L, ch, cl, ARGV[2] == 'peek', nh, nl, injected)
