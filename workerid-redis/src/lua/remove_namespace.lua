-- remove_namespace: delete a namespace's two keys when no live lease holds
-- any of its IDs (server clock).
-- KEYS[1] namespace hash   KEYS[2] lease-end sorted set
-- Returns {'removed'} | {'unknown'} | {'in_use', live}
if redis.call('HEXISTS', KEYS[1], 'max') == 0 then
  return {'unknown'}
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- Scores are lease ends in ms (0 once released): live means past now.
local live = redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%.0f', now), '+inf')
if live > 0 then
  return {'in_use', live}
end
redis.call('DEL', KEYS[1], KEYS[2])
return {'removed'}
