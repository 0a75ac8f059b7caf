-- acquire: grant a free worker ID, or answer an acquire sent again with the
-- lease its token already holds.
-- KEYS[1] namespace hash   KEYS[2] lease-end sorted set
-- ARGV[1] max_worker_id   ARGV[2] token   ARGV[3] ttl in ms   ARGV[4] holder
-- Returns {'ok', id, fence, watermark[, 'new']} ('new': this grant created
-- the namespace) | {'mismatch', stored max} | {'full'}
--
-- A namespace is two keys:
--   the hash:  `max`, `next` (IDs never granted are next..max), per ID
--              granted at least once
--              "<token> <fence> <watermark> <ends> <holder>",
--              and per token of a lease not granted again since
--              "t:<token>" -> its ID, so an acquire whose answer was lost
--              finds its grant when sent again;
--   the zset:  the same IDs scored by <ends>. Its head is the only acquire
--              candidate: O(log n).
-- <ends> is the instant (ms, server clock) the lease ends, 0 once released;
-- a lease is live while ends * 1000 > now in us. Scripts are written for this
-- VM's costs: every redis.call, number formatting and closure costs about a
-- microsecond, so there are no helper functions, no scores read back (the
-- hash holds <ends> too; a double reply is slow to format and to parse) and
-- no string.format on the common paths.
--
-- Six calls on the common path: the time, the zset's head, one read of the
-- hash (the stored max, the never-used counter, the token's index entry and
-- the head's state together), the index entry of the head's last token, two
-- writes.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
local own = 't:' .. ARGV[2]
local meta
if head then
  meta = redis.call('HMGET', KEYS[1], 'max', 'next', own, head)
else
  meta = redis.call('HMGET', KEYS[1], 'max', 'next', own)
end
if meta[1] and meta[1] ~= ARGV[1] then
  return {'mismatch', meta[1]}
end
-- ms since the epoch: 13 digits, exact in tostring's 14 significant digits
-- (string.format only past 10^14 ms: the year 5138, or a ttl of millennia).
-- Rounded up, so the lease lasts at least ttl.
local ends = math.ceil(now / 1000) + ARGV[3]
ends = ends < 1e14 and tostring(ends) or string.format('%.0f', ends)
if meta[3] then
  -- Sent again: the token's own lease, if still live, extended.
  local mine = redis.call('HGET', KEYS[1], meta[3])
  local held, f, w, e, h = string.match(mine or '', '^(%S+) (%d+) (%d+) (%d+) (%S+)$')
  if held == ARGV[2] and e * 1000 > now then
    redis.call('HSET', KEYS[1], meta[3], held .. ' ' .. f .. ' ' .. w .. ' ' .. ends .. ' ' .. h)
    redis.call('ZADD', KEYS[2], ends, meta[3])
    return {'ok', meta[3], tonumber(f), w}
  end
end
local old_fence, old_watermark, old_token, free
if head then
  local held, f, w, e = string.match(meta[4] or '', '^(%S+) (%d+) (%d+) (%d+) (%S+)$')
  if not held then
    return error('corrupt lease state for worker ID ' .. head)
  end
  -- Released (0) or expired: the ID is free.
  old_fence, old_watermark, old_token, free = f, w, held, e * 1000 <= now
end
local id, fence, watermark
if free then
  id = head
  fence = old_fence + 1
  -- tostring keeps 14 digits: a fence past 10^14 (never, in practice) needs
  -- the exact format.
  local fence_text = fence < 1e14 and tostring(fence) or string.format('%.0f', fence)
  watermark = old_watermark
  -- The last holder's index entry goes with its lease, unless that token
  -- has been granted another ID since.
  local old_index = 't:' .. old_token
  if old_index ~= own and redis.call('HGET', KEYS[1], old_index) == id then
    redis.call('HDEL', KEYS[1], old_index)
  end
  redis.call('HSET', KEYS[1], id, ARGV[2] .. ' ' .. fence_text .. ' ' .. watermark .. ' ' .. ends .. ' ' .. ARGV[4], own, id)
else
  local next_id = tonumber(meta[2] or '0')
  if next_id > tonumber(ARGV[1]) then
    return {'full'}
  end
  id = tostring(next_id)
  fence = 1
  watermark = '0'
  redis.call('HSET', KEYS[1], id, ARGV[2] .. ' 1 0 ' .. ends .. ' ' .. ARGV[4], own, id, 'next', next_id + 1, 'max', ARGV[1])
end
redis.call('ZADD', KEYS[2], ends, id)
if not meta[1] then
  return {'ok', id, fence, watermark, 'new'}
end
return {'ok', id, fence, watermark}
