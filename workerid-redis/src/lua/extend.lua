-- extend: renew a live lease to now + ttl and raise its watermark, or
-- release it (ttl '') and set its watermark (unless 0). Renew and release are
-- one script: they differ only in the new end and the watermark rule.
-- KEYS[1] namespace hash   KEYS[2] lease-end sorted set
-- ARGV[1] id   ARGV[2] token   ARGV[3] ttl in ms, or '' to release
-- ARGV[4] watermark
-- Returns 'ok' | 'not_assigned' | 'mismatch' | 'expired'
--
-- Four calls: the state, the time, two writes. See acquire.lua for the keys.
local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state then
  return 'not_assigned'
end
local token, fence, watermark, ends, holder = string.match(state, '^(%S+) (%d+) (%d+) (%d+) (%S+)$')
if not token then
  return error('corrupt lease state for worker ID ' .. ARGV[1])
end
if ends == '0' then
  -- Released: not assigned, whoever asks.
  return 'not_assigned'
end
if token ~= ARGV[2] then
  return 'mismatch'
end
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
if ends * 1000 <= now then
  return 'expired'
end
-- Watermarks are u64 decimal strings without leading zeros, compared as
-- such: a double would lose precision above 2^53. A release's watermark
-- (other than 0) is its holder's final word; a renewal's only raises it.
local given = ARGV[4]
if ARGV[3] == '' then
  ends = '0'
  if given ~= '0' then
    watermark = given
  end
else
  if #given > #watermark or (#given == #watermark and given > watermark) then
    watermark = given
  end
  ends = math.ceil(now / 1000) + ARGV[3]
  ends = ends < 1e14 and tostring(ends) or string.format('%.0f', ends)
end
redis.call('ZADD', KEYS[2], ends, ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], token .. ' ' .. fence .. ' ' .. watermark .. ' ' .. ends .. ' ' .. holder)
return 'ok'
