-- Create, update or delete one stored profile, fenced on its version, atomically with the
-- index of stored profiles. A deleted profile leaves a tombstone (`id`, `version`,
-- `deleted_at`) so that its versions never repeat: a create after a delete goes on from
-- the deleted version. Redis 6.2 Lua.
-- KEYS: [1] the profile's hash
--       [2] the index of stored profiles (sorted set, every member scored 0: by id)
-- ARGV: [1] "create", "update" or "delete"
--       [2] the profile id (the index member, the hash's `id`)
--       [3] the expected version, or "" (a create; a delete of whatever is stored)
--       [4] the normalised document (compact JSON text; "" for a delete)
--       [5] the time of the write (ISO-8601 UTC)
-- Returns {"ok", version, created_at} once written (the version written, for a delete
-- the version deleted, as stored; the profile's creation time). Otherwise nothing is
-- written and it returns {"exists", version, ""} (a create of a stored profile),
-- {"missing", "", ""} (an update or delete of none, or of a deleted one), or
-- {"stale", version, ""} (another version is stored: text, which may be no number).
local key_types = {'hash', 'zset'}
for index, key in ipairs(KEYS) do
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= key_types[index] then
    return redis.error_reply('WRONGTYPE profile_write: ' .. key .. ' holds a ' .. found
      .. ', not a ' .. key_types[index])
  end
end

local action, profile_id, expected, document, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local stored = redis.call('HMGET', KEYS[1], 'version', 'deleted_at')
local version, deleted = stored[1], stored[2]
local live = redis.call('EXISTS', KEYS[1]) == 1 and not deleted
local shown = version or ''

if action == 'create' then
  if live then
    return {'exists', shown, ''}
  end
  local next_version = (tonumber(version or '0') or 0) + 1
  redis.call('HDEL', KEYS[1], 'deleted_at')
  redis.call('HSET', KEYS[1], 'id', profile_id, 'version', next_version, 'document', document,
    'created_at', now, 'updated_at', now)
  redis.call('ZADD', KEYS[2], 0, profile_id)
  return {'ok', tostring(next_version), now}
end

if not live then
  return {'missing', '', ''}
end
if action == 'update' and expected == '' then
  return redis.error_reply('profile_write: an update needs the expected version')
end
if expected ~= '' and version ~= expected then
  return {'stale', shown, ''}
end

if action == 'update' then
  local next_version = tonumber(version) + 1
  redis.call('HSET', KEYS[1], 'version', next_version, 'document', document, 'updated_at', now)
  redis.call('ZADD', KEYS[2], 0, profile_id)
  return {'ok', tostring(next_version), redis.call('HGET', KEYS[1], 'created_at') or ''}
end

if action == 'delete' then
  local created = redis.call('HGET', KEYS[1], 'created_at') or ''
  redis.call('HDEL', KEYS[1], 'document', 'created_at')
  redis.call('HSET', KEYS[1], 'id', profile_id, 'deleted_at', now, 'updated_at', now)
  redis.call('ZREM', KEYS[2], profile_id)
  return {'ok', shown, created}
end
return redis.error_reply('profile_write: unknown action ' .. tostring(action))
