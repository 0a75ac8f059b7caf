-- Shared by every script of workerid-redis.
--
-- A namespace is two keys:
--   the hash:  `max`, `next` (IDs never granted are next..max), and per ID
--              granted at least once "<token> <fence> <watermark>";
--   the zset:  every ID granted at least once, scored by the instant (us,
--              server clock) its lease ends, or 0 once released. Its head is
--              the only acquire candidate: O(log n).
-- Writes are the expensive calls (several us each), so a renew or release
-- writes once, and twice only when the watermark rises.
--
-- Instants are microseconds on the server's clock (TIME): exact in a double
-- up to 2^53 us (year 2255). Numbers are written with '%.0f', never
-- tostring(), which keeps only 14 digits.
local function server_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function fmt(n)
  return string.format('%.0f', n)
end

local function parse(state)
  return string.match(state, '^(%S+) (%d+) (%d+)$')
end

-- Watermarks are u64 decimal strings without leading zeros, compared as
-- such: a double would lose precision above 2^53.
local function above(a, b)
  return #a > #b or (#a == #b and a > b)
end

-- Checks that `token` holds `id` live. Returns now, fence and watermark, or
-- nil and the contract's answer.
local function check_holder(hash, zset, id, token)
  local state = redis.call('HGET', hash, id)
  if not state then
    return nil, 'not_assigned'
  end
  local holder, fence, watermark = parse(state)
  if not holder then
    return error('corrupt lease state for worker ID ' .. id)
  end
  local ends = tonumber(redis.call('ZSCORE', zset, id))
  if ends == 0 then
    -- Released: not assigned, whoever asks.
    return nil, 'not_assigned'
  end
  if holder ~= token then
    return nil, 'mismatch'
  end
  local now = server_now_us()
  if ends <= now then
    return nil, 'expired'
  end
  return now, fence, watermark
end

-- Stores a raised watermark (one more write, only when it rises).
local function raise_watermark(hash, id, token, fence, watermark, given)
  if above(given, watermark) then
    redis.call('HSET', hash, id, token .. ' ' .. fence .. ' ' .. given)
  end
end
