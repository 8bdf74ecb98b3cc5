-- THROTTLE.LEASE: credits of the current fixed window (engine.Limit.Lease).
-- KEYS[1] key; ARGV now|'' limit period batch
local key = KEYS[1]
local nh, nl, injected = clock(ARGV[1])
local L = newLimit(3, pint(ARGV[2], 'limit'), pint(ARGV[3], 'period'), {0, 0})
local gh, gl = parse(ARGV[4], 'batch')
local s = load(key, nh, nl)
local nxt, th, tl, d = lease(L, s, nh, nl, gh, gl)
save(key, s, nxt, nh, nl, th, tl, injected)
return decisionReply(d)
