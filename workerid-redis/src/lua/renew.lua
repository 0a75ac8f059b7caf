-- renew: extend a live lease to now + ttl and raise its watermark.
-- KEYS[1] expiry zset   KEYS[2] holder hash   KEYS[3] watermark hash
-- ARGV[1] id   ARGV[2] token   ARGV[3] ttl in us   ARGV[4] watermark
-- Returns 'ok' | 'not_assigned' | 'mismatch' | 'expired'
local now, refused = check_holder(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
if not now then
  return refused
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
raise_watermark(KEYS[3], ARGV[1], ARGV[4])
return 'ok'
