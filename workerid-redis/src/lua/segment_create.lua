-- create a segment tag unless it exists.
-- KEYS[1] max hash   KEYS[2] step hash
-- ARGV[1] tag   ARGV[2] initial max (the first ID)   ARGV[3] step
-- Returns 1 when created, 0 when it existed.
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
