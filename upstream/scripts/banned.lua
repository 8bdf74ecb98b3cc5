-- THROTTLE.BANNED and THROTTLE.UNBAN on their own (ban.lua runs them too,
-- but carries the check a ban guards, whose functions cost every call).
-- KEYS[1] the ban record; ARGV now|'' mode(banned|unban), replies as
-- ban.lua's. The body is lib.lua's banQuery, which exec.lua runs too.
local nh, nl = clock(ARGV[1])
return banQuery(ARGV[2], KEYS[1], nh, nl)
