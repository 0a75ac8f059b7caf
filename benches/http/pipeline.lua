-- wrk: send 16 requests at a time on each connection (HTTP/1.1 pipelining)
init = function(args)
  local r = {}
  for i = 1, 16 do r[i] = wrk.format(nil) end
  req = table.concat(r)
end
request = function() return req end
