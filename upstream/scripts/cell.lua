-- CL.THROTTLE (engine.Cell.Throttle).
-- KEYS[1] key; ARGV now|'' max_burst count_per_period period_sec quantity
local key = KEYS[1]
local nh, nl, injected = clock(ARGV[1])
local C = newCell(pint(ARGV[2], 'max_burst'), pint(ARGV[3], 'count'), pint(ARGV[4], 'period'))
local qh, ql = parse(ARGV[5], 'quantity')
local s = load(key, nh, nl)
local nxt, th, tl, r = throttle(C, s, nh, nl, qh, ql)
save(key, s, nxt, nh, nl, th, tl, injected)
return r
