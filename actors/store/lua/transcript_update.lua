-- Replace one transcript message's content and metadata and publish the whole message,
-- atomically; its id, task, session, kind, creation time and turn stay as they are.
-- Redis 6.2 Lua.
-- KEYS: [1] the message hash
--       [2] the transcript stream
-- ARGV: [1] the new content
--       [2] the new metadata (JSON object text)
--       [3] approximate MAXLEN of the stream
-- Returns the message hash after the update (flat: name, value, ...), or an empty array
-- when the message does not exist (nothing written).
local key_types = {'hash', 'stream'}
for index, key in ipairs(KEYS) do
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= key_types[index] then
    return redis.error_reply('WRONGTYPE transcript_update: ' .. key .. ' holds a ' .. found
      .. ', not a ' .. key_types[index])
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end

redis.call('HSET', KEYS[1], 'content', ARGV[1], 'metadata', ARGV[2])
local message = redis.call('HGETALL', KEYS[1])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*',
  'event', 'session.message.updated', unpack(message))
return message
