-- THROTTLE.CHECK ... BAN: a check with a penalty box (limits/ban.go,
-- engine/ban.go). THROTTLE.BANNED and UNBAN are banned.lua.
-- KEYS[1] key, KEYS[2] its ban record; ARGV now|'' 'check' algo limit
-- period burst cost threshold duration -> the decision
-- The record is "64 count end exp" while denials are counted (until end)
-- and "65 until 0 exp" while banned.
-- The body is lib.lua's banCheck, which exec.lua runs too.
local nh, nl, injected = clock(ARGV[1])
if ARGV[2] ~= 'check' then error({err = 'ERR unknown ban mode'}) end
return banCheck(KEYS[1], KEYS[2], nh, nl, injected, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
