-- force_release: an operator frees a live lease whatever its token, as a
-- release would (score 0), keeping its fence and watermark. The holder's
-- token stays in the hash, but check_holder answers 'not_assigned' to any
-- token once the score is 0.
-- KEYS[1] namespace hash   KEYS[2] lease-end sorted set
-- ARGV[1] id
-- Returns 1 when a live lease was freed, 0 when the ID was not held live.
local ends = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not ends then
  return 0
end
local score = tonumber(ends)
if score == 0 or score <= server_now_us() then
  return 0
end
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return 1
