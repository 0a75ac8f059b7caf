-- give a tail back: set max to ARGV[3] if it is still ARGV[2].
-- KEYS[1] max hash   ARGV[1] tag   ARGV[2] expected max   ARGV[3] new max
-- Returns 1 | 0 | 'unknown'
local max = redis.call('HGET', KEYS[1], ARGV[1])
if not max then
  return 'unknown'
end
if max ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
