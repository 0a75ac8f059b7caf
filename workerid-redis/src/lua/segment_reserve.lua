-- reserve the next range of a tag: HINCRBY is exact int64 arithmetic and
-- refuses to pass 2^63 - 1; values go back as strings, never as Lua doubles.
-- Every reservation bumps the tag's version, which a give-back compares.
-- KEYS[1] max hash   KEYS[2] step hash   KEYS[3] version hash
-- ARGV[1] tag   ARGV[2] step, or '' for the tag's own
-- Returns {'ok', max, step used, version} | 'unknown' | 'exhausted'
local step = redis.call('HGET', KEYS[2], ARGV[1])
if not step then
  return 'unknown'
end
local used = step
if ARGV[2] ~= '' then
  used = ARGV[2]
end
local result = redis.pcall('HINCRBY', KEYS[1], ARGV[1], used)
if type(result) == 'table' and result.err then
  -- Only the overflow is the tag's end; any other refusal (MISCONF while
  -- the AOF cannot be written, OOM) is the server's, and goes back as is.
  if string.find(result.err, 'overflow', 1, true) then
    return 'exhausted'
  end
  return redis.error_reply(result.err)
end
local version = redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
return {'ok', redis.call('HGET', KEYS[1], ARGV[1]), used, tostring(version)}
