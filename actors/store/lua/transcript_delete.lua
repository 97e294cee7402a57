-- Delete one transcript message and publish its deletion, atomically. Redis 6.2 Lua.
-- KEYS: [1] the message hash
--       [2] the session's message index (sorted set)
--       [3] the transcript sessions set
--       [4] the transcript stream
-- ARGV: [1] message id
--       [2] task id the message must belong to
--       [3] session id the message must belong to
--       [4] the session member "<task>:<session>"
--       [5] approximate MAXLEN of the stream
-- Returns 1 when deleted; 0 when there is no such message, or it belongs to another
-- session (nothing written either way). A session left without messages leaves the
-- sessions set.
local key_types = {'hash', 'zset', 'set', 'stream'}
for index, key in ipairs(KEYS) do
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= key_types[index] then
    return redis.error_reply('WRONGTYPE transcript_delete: ' .. key .. ' holds a ' .. found
      .. ', not a ' .. key_types[index])
  end
end
local owner = redis.call('HMGET', KEYS[1], 'task_id', 'session_id')
if owner[1] ~= ARGV[2] or owner[2] ~= ARGV[3] then
  return 0
end

redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[4])
end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*',
  'event', 'session.message.deleted', 'id', ARGV[1], 'task_id', ARGV[2],
  'session_id', ARGV[3])
return 1
