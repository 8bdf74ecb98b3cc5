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
local key = KEYS[1]
local nh, nl, injected = clock(ARGV[1])
local mode = ARGV[2]

local function positive(s, what)
  local h, l = parse(s, what)
  if le(h, l, 0, 0) then error({err = 'ERR ' .. what .. ' must be positive'}) end
  return h, l
end

local function slotArg(s)
  local h, l = parse(s, 'slot')
  if h ~= 0 or l >= 1024 then error({err = 'ERR slot out of range'}) end
  return l
end

-- keep makes the hash live past its latest slot expiry and its last
-- generation, and records the expiry eh:el.
local function keep(eh, el)
  local x = redis.call('HGET', key, 'x')
  if x then eh, el = max(eh, el, parse(x, 'stored expiry')) end
  redis.call('HSET', key, 'x', fmt(eh, el))
  if not injected then
    local gh, gl = parse(redis.call('HGET', key, 'g') or '0', 'stored generation')
    gh, gl = add(gh, gl, 0, 1)
    eh, el = max(eh, el, gh, gl)
    redis.call('PEXPIREAT', key, fmt(ceilMs(eh, el)))
  end
end

-- held returns the expiry of slot f if the token's generation holds it.
local function held(f, gh, gl)
  local v = redis.call('HGET', key, f)
  if not v then return nil end
  local g, e = string.match(v, '^(%-?%d+) (%-?%d+)$')
  if not g then return nil end
  local eh, el = parse(e, 'stored expiry')
  local hh, hl = parse(g, 'stored generation')
  if not eq(hh, hl, gh, gl) or le(eh, el, nh, nl) then return nil end
  return eh, el
end

if mode == 'acquire' then
  local limh, liml = positive(ARGV[3], 'limit')
  if limh ~= 0 or liml > 1024 then error({err = 'ERR limit must be an integer from 1 to 1024'}) end
  local th, tl = positive(ARGV[4], 'ttl')
  local all = redis.call('HGETALL', key)
  local live, n = {}, 0
  local fh, fl = 2147483647, 4294967295
  local gh, gl = 0, 0
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if f == 'g' then
      gh, gl = parse(v, 'stored generation')
    elseif f ~= 'x' then
      local e = string.match(v, ' (%-?%d+)$')
      local eh, el = parse(e or '', 'stored expiry')
      if lt(nh, nl, eh, el) then
        live[tonumber(f)] = true
        n = n + 1
        fh, fl = min(fh, fl, eh, el)
      else
        redis.call('HDEL', key, f)
      end
    end
  end
  if n >= liml then
    return {'0', tostring(n), '0', '0', fmt(durMs(sub(fh, fl, nh, nl)))}
  end
  local slot = 0
  while live[slot] do slot = slot + 1 end
  gh, gl = add(gh, gl, 0, 1)
  gh, gl = max(gh, gl, nh, nl)
  gh, gl = max(gh, gl, 0, 1)
  local eh, el = satAdd(nh, nl, th, tl)
  local gen = fmt(gh, gl)
  redis.call('HSET', key, tostring(slot), gen .. ' ' .. fmt(eh, el), 'g', gen)
  keep(eh, el)
  return {'1', tostring(n + 1), tostring(slot), gen, '0'}
end

local f = tostring(slotArg(ARGV[3]))
local gh, gl = parse(ARGV[4], 'generation')
if mode == 'release' then
  if not held(f, gh, gl) then return '0' end
  redis.call('HDEL', key, f)
  return '1'
end
if mode == 'refresh' then
  local th, tl = positive(ARGV[5], 'ttl')
  if not held(f, gh, gl) then return '0' end
  local eh, el = satAdd(nh, nl, th, tl)
  redis.call('HSET', key, f, fmt(gh, gl) .. ' ' .. fmt(eh, el))
  keep(eh, el)
  return '1'
end
error({err = 'ERR unknown slots mode'})
