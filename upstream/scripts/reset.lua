-- THROTTLE.RESET: delete keys; the reply counts those that held live state.
-- KEYS[1..n]; ARGV now|''
local nh, nl = clock(ARGV[1])
local live = 0
for i = 1, #KEYS do
  local v = redis.pcall('GET', KEYS[i])
  if type(v) == 'table' then
    live = live + 1
  elseif v then
    local e = string.match(v, ' (%-?%d+)$')
    if not e then
      live = live + 1
    else
      local eh, el = parse(e, 'stored expiry')
      if lt(nh, nl, eh, el) then live = live + 1 end
    end
  end
  redis.call('DEL', KEYS[i])
end
return tostring(live)
