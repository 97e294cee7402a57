-- Generation fence: move a record to a new generation only from the expected one.
-- KEYS: [1] the record's hash
-- ARGV: [1] expected generation ("0" when the record must not exist yet)
--       [2] new generation
-- Returns {1, new} when it moved, {0, actual} when the expected generation was stale.
local actual = tonumber(redis.call('HGET', KEYS[1], 'generation') or '0')
local expected = tonumber(ARGV[1])
if actual ~= expected then
  return {0, actual}
end
redis.call('HSET', KEYS[1], 'generation', ARGV[2])
return {1, tonumber(ARGV[2])}
