-- THROTTLE.RESERVE and THROTTLE.SETTLE (limits/reserve.go).
-- KEYS[1] key, KEYS[2] the reservation's record; ARGV now|'' mode ...
--   reserve: algo limit period estimate ttl -> the decision of a check of
--            estimate units; when admitted the record "80 estimate now exp"
--   settle:  algo limit period actual -> 1 if this call settled the
--            reservation (refunding or charging the difference), else 0
-- The caller names the record (its id is drawn by the client); an id
-- already in use is refused before anything is charged.
-- The body is lib.lua's reservation, which exec.lua runs too.
local nh, nl, injected = clock(ARGV[1])
return reservation(KEYS[1], KEYS[2], nh, nl, injected, ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
