-- THROTTLE.CHECK ... BAN, THROTTLE.BANNED and THROTTLE.UNBAN: a check
-- with a penalty box (limits/ban.go, engine/ban.go).
-- ARGV now|'' mode ...
--   check:  KEYS[1] key, KEYS[2] its ban record; algo limit period burst cost threshold duration
--           -> the decision
--   banned: KEYS[1] the ban record -> ms left of the ban, 0 if none
--   unban:  KEYS[1] the ban record -> 1 if a ban was lifted, else 0
-- The record is "64 count end exp" while denials are counted (until end)
-- and "65 until 0 exp" while banned.
-- The bodies are lib.lua's banCheck and banQuery, which exec.lua runs too.
local nh, nl, injected = clock(ARGV[1])
local mode = ARGV[2]
if mode == 'check' then
  return banCheck(KEYS[1], KEYS[2], nh, nl, injected, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
end
return banQuery(mode, KEYS[1], nh, nl)
