-- Shared by every script of workerid-redis.
--
-- Expiry instants are microseconds on the server's clock (TIME), kept as
-- sorted-set scores: exact in a double up to 2^53 us (year 2255).
local function server_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Watermarks are u64 decimal strings without leading zeros, compared as such:
-- Lua numbers are doubles and would lose precision above 2^53.
local function raise_watermark(key, id, value)
  local current = redis.call('HGET', key, id)
  if not current or #value > #current or (#value == #current and value > current) then
    redis.call('HSET', key, id, value)
  end
end

-- Checks that `token` holds `id` live. Returns the current time, or nil and
-- the contract's answer.
local function check_holder(expiry_key, holder_key, id, token)
  local holder = redis.call('HGET', holder_key, id)
  if not holder then
    return nil, 'not_assigned'
  end
  if holder ~= token then
    return nil, 'mismatch'
  end
  local now = server_now_us()
  if tonumber(redis.call('ZSCORE', expiry_key, id)) <= now then
    return nil, 'expired'
  end
  return now, nil
end
