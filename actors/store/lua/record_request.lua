-- Record a request that changed nothing (a no-op), so that a replay answers it again:
-- the first outcome a request id got is the only one it ever gets.
-- KEYS: [1] the route's applied requests hash (request id -> its outcome)
--       [2] the route's applied request ids, oldest first (list)
-- ARGV: [1] request id
--       [2] the outcome (JSON: [generation, fields]) to keep unless one is kept already
--       [3] how many ids the route keeps
--       [4] seconds they are kept after the last one
-- Returns the outcome the request id has now: the one kept before, else ARGV[2].
local first = redis.call('HGET', KEYS[1], ARGV[1])
if first then
  return first
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[1])
while redis.call('LLEN', KEYS[2]) > tonumber(ARGV[3]) do
  redis.call('HDEL', KEYS[1], redis.call('LPOP', KEYS[2]))
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return ARGV[2]
