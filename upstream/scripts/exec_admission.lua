-- The admission operations and GCRA of a transaction (exec.lua): this
-- file replaces exec.lua's empty opArgs, which gives, per operation that
-- runs a lib.lua function, its number of keys, its number of arguments
-- (keys included) and the function run on them.
local opArgs = {
  gcra = {1, 4, function(v) return rateGCRA(v[1], nh, nl, injected, v[2], v[3], v[4]) end},
  acquire = {1, 3, function(v) return slots(v[1], nh, nl, injected, 'acquire', v[2], v[3]) end},
  release = {1, 3, function(v) return slots(v[1], nh, nl, injected, 'release', v[2], v[3]) end},
  refresh = {1, 4, function(v) return slots(v[1], nh, nl, injected, 'refresh', v[2], v[3], v[4]) end},
  checkban = {2, 9, function(v)
    return banCheck(v[1], v[2], nh, nl, injected, v[3], v[4], v[5], v[6], v[7], v[8], v[9])
  end},
  banned = {1, 1, function(v) return banQuery('banned', v[1], nh, nl) end},
  unban = {1, 1, function(v) return banQuery('unban', v[1], nh, nl) end},
  reserve = {2, 7, function(v)
    return reservation(v[1], v[2], nh, nl, injected, 'reserve', v[3], v[4], v[5], v[6], v[7])
  end},
  settle = {2, 6, function(v)
    return reservation(v[1], v[2], nh, nl, injected, 'settle', v[3], v[4], v[5], v[6])
  end},
}
