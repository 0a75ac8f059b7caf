-- renew: extend a live lease to now + ttl and raise its watermark.
-- KEYS[1] namespace hash   KEYS[2] lease-end sorted set
-- ARGV[1] id   ARGV[2] token   ARGV[3] ttl in us   ARGV[4] watermark
-- Returns 'ok' | 'not_assigned' | 'mismatch' | 'expired'
local now, fence, watermark = check_holder(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
if not now then
  return fence
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
raise_watermark(KEYS[1], ARGV[1], ARGV[2], fence, watermark, ARGV[4])
return 'ok'
