-- release: free a live lease at once and raise its watermark.
-- KEYS[1] expiry zset   KEYS[2] holder hash   KEYS[3] watermark hash
-- ARGV[1] id   ARGV[2] token   ARGV[3] watermark
-- Returns 'ok' | 'not_assigned' | 'mismatch' | 'expired'
local now, refused = check_holder(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
if not now then
  return refused
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[1], now, ARGV[1])
raise_watermark(KEYS[3], ARGV[1], ARGV[3])
return 'ok'
