-- THROTTLE.RETURN: give back leased credits (engine.Return).
-- KEYS[1] key; ARGV now|'' credits reset_at_ms
local key = KEYS[1]
local nh, nl, injected = clock(ARGV[1])
local ch, cl = parse(ARGV[2], 'credits')
local rh, rl = parse(ARGV[3], 'reset_at_ms')
local s = load(key, nh, nl)
local nxt, th, tl, ah, al = giveBack(s, nh, nl, ch, cl, rh, rl)
save(key, s, nxt, nh, nl, th, tl, injected)
return fmt(ah, al)
