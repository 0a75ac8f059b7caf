-- give a tail back: set max to ARGV[4] if it is still ARGV[2] and the tag's
-- version still ARGV[3], the one its reservation made, and move the version
-- on; comparing the max alone would let a resent give-back undo a later
-- reservation that was given back to the same max (ABA), and a give-back
-- that kept the version would let one undo a later reservation by a
-- writer that knows no version.
-- KEYS[1] max hash   KEYS[2] version hash
-- ARGV[1] tag   ARGV[2] expected max   ARGV[3] expected version   ARGV[4] new max
-- Returns 1 | 0 | 'unknown' (an unknown tag whatever else is wrong)
local max = redis.call('HGET', KEYS[1], ARGV[1])
if not max then
  return 'unknown'
end
-- a new max above the range's end would hand IDs out twice; both are
-- decimals without leading zeros, compared as such (Lua's numbers lose
-- digits past 2^53)
local new, expected = ARGV[4], ARGV[2]
if #new > #expected or (#new == #expected and new > expected) then
  return 0
end
local version = redis.call('HGET', KEYS[2], ARGV[1]) or '0'
if max ~= ARGV[2] or version ~= ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
return 1
