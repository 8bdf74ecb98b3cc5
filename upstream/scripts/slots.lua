-- THROTTLE.ACQUIRE, RELEASE and REFRESH: the concurrency slots of one key
-- (limits/slots.go), all in one hash.
-- KEYS[1] the key's slot hash; ARGV now|'' mode ...
--   acquire limit ttl    -> {acquired, in_flight, slot, generation, retry_after_ms}
--   release slot gen     -> 1 if the token held its slot and freed it, else 0
--   refresh slot gen ttl -> 1 if the token holds its slot (now expiring ttl from now), else 0
-- The hash holds field "<slot>" = "generation expiry" per held slot, "g" =
-- the last generation given and "x" = the latest expiry a slot was given.
-- A generation is max(now, g+1, 1): increasing while the hash lives, and
-- the hash lives until after both x and g (ns), so a generation once given
-- is never given again on the same key, and a stale token frees nothing.
-- The body is lib.lua's slots, which exec.lua runs too.
local nh, nl, injected = clock(ARGV[1])
return slots(KEYS[1], nh, nl, injected, ARGV[2], ARGV[3], ARGV[4], ARGV[5])
