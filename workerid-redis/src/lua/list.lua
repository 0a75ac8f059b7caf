-- list: every ID ever granted, read in one atomic step with the server's time.
-- KEYS[1] namespace hash   KEYS[2] lease-end sorted set
-- Returns {'unknown'} for a namespace never used, else
-- {'ok', max, now_us, id1, ends_us1, fence1, watermark1, id2, ...}
-- where ends_us is 0 once released (numbers as decimal strings).
local max = redis.call('HGET', KEYS[1], 'max')
if not max then
  return {'unknown'}
end
local now = server_now_us()
local ends = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local states = redis.call('HGETALL', KEYS[1])
local by_id = {}
for i = 1, #states, 2 do
  by_id[states[i]] = states[i + 1]
end
local out = {'ok', max, fmt(now)}
for i = 1, #ends, 2 do
  local id = ends[i]
  local holder, fence, watermark = parse(by_id[id] or '')
  if not holder then
    return error('corrupt lease state for worker ID ' .. id)
  end
  out[#out + 1] = id
  out[#out + 1] = fmt(tonumber(ends[i + 1]))
  out[#out + 1] = fence
  out[#out + 1] = watermark
end
return out
