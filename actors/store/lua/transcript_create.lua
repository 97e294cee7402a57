-- Create one transcript message and publish it, atomically. Redis 6.2 Lua.
-- KEYS: [1] the message hash
--       [2] the session's message index (sorted set: message id -> created_at, epoch s)
--       [3] the transcript sessions set (member "<task>:<session>")
--       [4] the transcript stream
-- ARGV: [1] message id (the index member)
--       [2] created_at, epoch seconds (the index score)
--       [3] the session member "<task>:<session>"
--       [4] approximate MAXLEN of the stream
--       [5..] the message hash fields, flat: name, value, ... (the event repeats them)
-- Returns 1 when created, 0 when a message with that id exists (nothing written).
local key_types = {'hash', 'zset', 'set', 'stream'}
for index, key in ipairs(KEYS) do
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= key_types[index] then
    return redis.error_reply('WRONGTYPE transcript_create: ' .. key .. ' holds a ' .. found
      .. ', not a ' .. key_types[index])
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end

local fields = {}
for index = 5, #ARGV do
  fields[#fields + 1] = ARGV[index]
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[3])
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*',
  'event', 'session.message.updated', unpack(fields))
return 1
