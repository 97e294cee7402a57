-- Park routes on a circuit (one, or all a route host parked on it in one round), only
-- while the circuit is not closed. Redis 6.2 Lua. Checked in the same script as the
-- write, so parking and closing are ordered: a route parked before the close is in the
-- close's release plan; one that comes after finds the circuit closed and is not parked
-- (it may dispatch). A circuit never written is closed.
-- KEYS: [1] the circuit's state hash
--       [2] the circuit's parked-routes sorted set (member = route id, score = park time)
-- ARGV: [1] park time, epoch seconds (kept from each route's first park: release order
--           is fair)
--       [2..] route ids
-- Returns {1, state, version, parked count} when parked (routes already parked keep
--         their first park time), else {0, "closed", version, parked count}.
for index, expected in ipairs({'hash', 'zset'}) do
  local found = redis.call('TYPE', KEYS[index]).ok
  if found ~= 'none' and found ~= expected then
    return redis.error_reply('WRONGTYPE circuit_park: ' .. KEYS[index] .. ' holds a '
      .. found .. ', not a ' .. expected)
  end
end

local current = redis.call('HMGET', KEYS[1], 'state', 'version')
local state = current[1] or 'closed'
local version = tonumber(current[2]) or 0
if state == 'closed' then
  return {0, state, version, redis.call('ZCARD', KEYS[2])}
end
local members = {}
for index = 2, #ARGV do
  members[#members + 1] = ARGV[1]
  members[#members + 1] = ARGV[index]
  if #members >= 1000 then  -- unpack has a stack limit: add in chunks
    redis.call('ZADD', KEYS[2], 'NX', unpack(members))
    members = {}
  end
end
if #members > 0 then
  redis.call('ZADD', KEYS[2], 'NX', unpack(members))
end
return {1, state, version, redis.call('ZCARD', KEYS[2])}
