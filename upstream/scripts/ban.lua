-- THROTTLE.CHECK ... BAN, THROTTLE.BANNED and THROTTLE.UNBAN: a check
-- with a penalty box (limits/ban.go, engine/ban.go).
-- ARGV now|'' mode ...
--   check:  KEYS[1] key, KEYS[2] its ban record; algo limit period burst cost threshold duration
--           -> the decision
--   banned: KEYS[1] the ban record -> ms left of the ban, 0 if none
--   unban:  KEYS[1] the ban record -> 1 if a ban was lifted, else 0
-- The record is "64 count end exp" while denials are counted (until end)
-- and "65 until 0 exp" while banned.
local nh, nl, injected = clock(ARGV[1])
local mode = ARGV[2]

-- bannedFor is engine.BannedFor: ns left of the ban rec records at now.
local function bannedFor(rec)
  if not rec or rec[1] ~= 65 or le(rec[2], rec[3], nh, nl) then return 0, 0 end
  return sub(rec[2], rec[3], nh, nl)
end

if mode == 'banned' then
  return fmt(durMs(bannedFor(loadRecord(KEYS[1], nh, nl))))
end
if mode == 'unban' then
  local lh, ll = bannedFor(loadRecord(KEYS[1], nh, nl))
  redis.call('DEL', KEYS[1])
  if lh == 0 and ll == 0 then return '0' end
  return '1'
end
if mode ~= 'check' then error({err = 'ERR unknown ban mode'}) end

local key, rkey = KEYS[1], KEYS[2]
local L = newLimit(algoArg(ARGV[3]), pint(ARGV[4], 'limit'), pint(ARGV[5], 'period'), pint(ARGV[6], 'burst'))
local ch, cl = parse(ARGV[7], 'cost')
local bth, btl = parse(ARGV[8], 'ban threshold')
local bdh, bdl = parse(ARGV[9], 'ban duration')
if le(bth, btl, 0, 0) or le(bdh, bdl, 0, 0) then error({err = 'ERR ban threshold must be positive'}) end
local rec = loadRecord(rkey, nh, nl)
local s = load(key, nh, nl)
local lh, ll = bannedFor(rec)
if lh ~= 0 or ll ~= 0 then
  local _, _, _, d = check(L, s, nh, nl, 0, 0)
  d[1], d[3], d[5] = {0, 0}, {0, 0}, {durMs(lh, ll)}
  return decisionReply(d)
end
local nxt, th, tl, d = check(L, s, nh, nl, ch, cl)
if d[1][1] ~= 0 or d[1][2] ~= 0 then
  save(key, s, nxt, nh, nl, th, tl, injected)
elseif lt(0, 0, ch, cl) then
  -- engine.Ban.Deny: count the denial; the threshold'th starts a ban.
  local kh, kl, eh, el = 0, 1, satAdd(nh, nl, L[3][1], L[3][2])
  if rec and rec[1] == 64 and lt(nh, nl, rec[4], rec[5]) then
    kh, kl = add(rec[2], rec[3], 0, 1)
    eh, el = rec[4], rec[5]
  end
  if le(bth, btl, kh, kl) then
    local uh, ul = satAdd(nh, nl, bdh, bdl)
    local th, tl = sub(uh, ul, nh, nl)
    saveRecord(rkey, {65, uh, ul, 0, 0}, nh, nl, th, tl, injected)
    if d[5][1] >= 0 then d[5] = {max(d[5][1], d[5][2], durMs(bdh, bdl))} end
  else
    local th, tl = sub(eh, el, nh, nl)
    saveRecord(rkey, {64, kh, kl, eh, el}, nh, nl, th, tl, injected)
  end
end
return decisionReply(d)
