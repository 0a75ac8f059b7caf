-- list: every ID ever granted, read in one atomic step with the server's time.
-- KEYS[1] namespace hash (its "t:<token>" index entries are skipped)
-- Returns {'unknown'} for a namespace never used, else
-- {'ok', max, now_s, now_us_part, id1, ends_ms1, fence1, watermark1, holder1, id2, ...}
-- where ends_ms is 0 once released (numbers as decimal strings).
local t = redis.call('TIME')
local states = redis.call('HGETALL', KEYS[1])
local out = {'ok', false, t[1], t[2]}
for i = 1, #states, 2 do
  local field = states[i]
  if field == 'max' then
    out[2] = states[i + 1]
  elseif field ~= 'next' and string.sub(field, 1, 2) ~= 't:' then
    local token, fence, watermark, ends, holder = string.match(states[i + 1], '^(%S+) (%d+) (%d+) (%d+) (%S+)$')
    if not token then
      return error('corrupt lease state for worker ID ' .. field)
    end
    out[#out + 1] = field
    out[#out + 1] = ends
    out[#out + 1] = fence
    out[#out + 1] = watermark
    out[#out + 1] = holder
  end
end
if not out[2] then
  return {'unknown'}
end
return out
