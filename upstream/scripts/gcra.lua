-- GCRA: Redis's rate-limit command (engine.RateGCRA.Apply), on
-- microseconds. The server validated the arguments (engine.NewRateGCRA):
-- the burst as Redis counts it, the emission interval in microseconds and
-- the cost of the call.
-- KEYS[1] key; ARGV now|'' burst interval_us tokens
-- Reply: limited burst remaining retry_after_s reset_after_s.
-- The body is lib.lua's rateGCRA, which exec.lua runs too.
local nh, nl, injected = clock(ARGV[1])
return rateGCRA(KEYS[1], nh, nl, injected, ARGV[2], ARGV[3], ARGV[4])
