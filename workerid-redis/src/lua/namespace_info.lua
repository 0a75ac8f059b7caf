-- namespace_info: a namespace's pool size and how many of its IDs a live
-- lease holds (server clock).
-- KEYS[1] namespace hash   KEYS[2] lease-end sorted set
-- Returns {max, live} | {false} for a namespace never used.
local max = redis.call('HGET', KEYS[1], 'max')
if not max then
  return {false}
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- Scores are lease ends in ms (0 once released): live means past now.
return {max, redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%.0f', now), '+inf')}
