-- THROTTLE.BANNED and THROTTLE.UNBAN, without the check a ban guards
-- (ban.lua), whose functions would cost every call.
-- KEYS[1] the ban record; ARGV now|'' mode(banned|unban), replies:
-- banned -> ms left of the ban, 0 if none; unban -> 1 if a ban was lifted.
-- The body is lib.lua's banQuery, which exec.lua runs too.
local nh, nl = clock(ARGV[1])
return banQuery(ARGV[2], KEYS[1], nh, nl)
