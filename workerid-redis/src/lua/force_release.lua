-- force_release: an operator frees a live lease whatever its token, as a
-- release would (ends 0), keeping its fence and watermark.
-- KEYS[1] namespace hash   KEYS[2] lease-end sorted set
-- ARGV[1] id
-- Returns 1 when a live lease was freed, 0 when the ID was not held live.
local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state then
  return 0
end
local token, fence, watermark, ends, holder = string.match(state, '^(%S+) (%d+) (%d+) (%d+) (%S+)$')
if not token then
  return error('corrupt lease state for worker ID ' .. ARGV[1])
end
local t = redis.call('TIME')
if ends == '0' or ends * 1000 <= t[1] * 1000000 + t[2] then
  return 0
end
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], token .. ' ' .. fence .. ' ' .. watermark .. ' 0 ' .. holder)
return 1
