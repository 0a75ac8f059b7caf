-- acquire: grant a free worker ID.
-- KEYS[1] namespace hash   KEYS[2] lease-end sorted set
-- ARGV[1] max_worker_id   ARGV[2] token   ARGV[3] ttl in us
-- Returns {'ok', id, fence, watermark} | {'mismatch', stored max} | {'full'}
--
-- Five calls: the time, the zset's head, one read of the hash (the stored
-- max, the never-used counter and the head's state together), two writes.
local now = server_now_us()
local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local free = head[1] and tonumber(head[2]) <= now
local meta
if free then
  meta = redis.call('HMGET', KEYS[1], 'max', 'next', head[1])
else
  meta = redis.call('HMGET', KEYS[1], 'max', 'next')
end
if meta[1] and meta[1] ~= ARGV[1] then
  return {'mismatch', meta[1]}
end
local id, fence, watermark
local fields = {}
if free then
  -- Released (score 0) or expired: the ID is free.
  id = head[1]
  local _, old_fence, old_watermark = parse(meta[3] or '')
  if not old_fence then
    return error('corrupt lease state for worker ID ' .. id)
  end
  fence = tonumber(old_fence) + 1
  watermark = old_watermark
else
  local next_id = tonumber(meta[2] or '0')
  if next_id > tonumber(ARGV[1]) then
    return {'full'}
  end
  id = fmt(next_id)
  fence = 1
  watermark = '0'
  fields = {'next', fmt(next_id + 1), 'max', ARGV[1]}
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), id)
redis.call('HSET', KEYS[1], id, ARGV[2] .. ' ' .. fmt(fence) .. ' ' .. watermark, unpack(fields))
return {'ok', id, fence, watermark}
