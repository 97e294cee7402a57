-- Park a route on a circuit, only while the circuit is not closed. Redis 6.2 Lua.
-- Checked in the same script as the write, so parking and closing are ordered: a route
-- parked before the close is in the close's release plan; one that comes after finds the
-- circuit closed and is not parked (it may dispatch).
-- KEYS: [1] the circuit's state hash
--       [2] the circuit's parked-routes sorted set (member = route id, score = park time)
-- ARGV: [1] route id
--       [2] park time, epoch seconds (kept from the first park: release order is fair)
-- Returns {1, state, version, parked count} when parked (or already parked), else
--         {0, state, version, parked count} with state "closed" (a circuit never written
--         is closed).
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
redis.call('ZADD', KEYS[2], 'NX', ARGV[2], ARGV[1])
return {1, state, version, redis.call('ZCARD', KEYS[2])}
