-- acquire: grant a free worker ID.
-- KEYS[1] meta hash (max, next)   KEYS[2] expiry zset (id -> free-at us)
-- KEYS[3] holder hash (id -> token)   KEYS[4] fence hash   KEYS[5] watermark hash
-- ARGV[1] max_worker_id   ARGV[2] token   ARGV[3] ttl in us
-- Returns {'ok', id, fence, watermark} | {'mismatch', stored max} | {'full'}
local stored = redis.call('HGET', KEYS[1], 'max')
if not stored then
  redis.call('HSET', KEYS[1], 'max', ARGV[1])
elseif stored ~= ARGV[1] then
  return {'mismatch', stored}
end
local now = server_now_us()
local id
-- Every ID granted once sits in the zset, ordered by the instant it is (or
-- became) free; the head is the only candidate: O(log n).
local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if head[1] and tonumber(head[2]) <= now then
  id = head[1]
else
  -- IDs never granted are next..max: no pre-filling.
  local next_id = tonumber(redis.call('HGET', KEYS[1], 'next') or '0')
  if next_id > tonumber(ARGV[1]) then
    return {'full'}
  end
  id = tostring(next_id)
  redis.call('HSET', KEYS[1], 'next', next_id + 1)
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), id)
redis.call('HSET', KEYS[3], id, ARGV[2])
local fence = redis.call('HINCRBY', KEYS[4], id, 1)
return {'ok', id, fence, redis.call('HGET', KEYS[5], id) or '0'}
