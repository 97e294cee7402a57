-- One circuit change, atomically: compare-and-set on the circuit's version, optional
-- probe-lease guards, the circuit hash, the index of known circuits, and (optionally) the
-- change's event on the circuit events stream. Redis 6.2 Lua.
-- The Python side plans the next state with the pure machine (circuits.machine); this
-- script only applies it if nobody changed the circuit since the caller read it.
-- KEYS: [1] the circuit's state hash
--       [2] the index set of known circuits (member = resource id)
--       [3] the circuit's parked-routes sorted set (read only, and only with `parked`)
--       [4] the circuit events stream (written only with `event`; may be left out without)
-- ARGV: [1] JSON object (decoded with cjson):
--         resource  the resource id (index member)
--         expected  the version the caller read (0 = never written)
--         fields    flat [name, value, ...] of every circuit field ("" = unset)
--         now       the caller's clock, epoch seconds (the lease guards compare with it)
--         guard     "" | "acquire" | "owner":
--                   acquire: the circuit is open or half-open, its open-until has passed
--                            and no unexpired lease exists (else nothing is written);
--                   owner:   `token` names the live, unexpired lease
--         token     the owner token, with guard "owner"
--         parked    true: also return the parked route ids, oldest park first
--         event     absent, or flat [name, value, ...] of the change's event, appended to
--                   KEYS[4] (MAXLEN ~ `maxlen`) in the same script as the change itself
--         maxlen    with `event`: the stream's approximate length bound
-- Returns {1, new version, {parked route ids}, event id or ""} when applied (the event
--         carries the new `version` first), else nothing is written and it returns
--         {0, actual version, "stale_version" | "closed" | "cooling_down" | "lease_held" |
--         "not_owner"}.
local request = cjson.decode(ARGV[1])

-- Redis does not roll a script back: refuse before the first write if a key holds the
-- wrong type, so an error never leaves half a change behind.
local key_types = {'hash', 'set', 'zset', 'stream'}
for index, key in ipairs(KEYS) do
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= key_types[index] then
    return redis.error_reply('WRONGTYPE circuit_apply: ' .. key .. ' holds a ' .. found
      .. ', not a ' .. key_types[index])
  end
end

local current = redis.call('HMGET', KEYS[1], 'version', 'state', 'open_until_epoch',
  'probe_token', 'lease_expires_epoch')
local actual = tonumber(current[1]) or 0
if actual ~= request.expected then
  return {0, actual, 'stale_version'}
end

local now = request.now
local token = current[4] or ''
local lease_expires = tonumber(current[5]) or 0
local lease_live = token ~= '' and now < lease_expires

if request.guard == 'acquire' then
  local state = current[2] or 'closed'
  if state ~= 'open' and state ~= 'half_open' then
    return {0, actual, 'closed'}
  end
  if lease_live then
    return {0, actual, 'lease_held'}
  end
  local open_until = tonumber(current[3]) or 0
  if token == '' and now < open_until then
    return {0, actual, 'cooling_down'}
  end
elseif request.guard == 'owner' then
  if not lease_live or token ~= request.token then
    return {0, actual, 'not_owner'}
  end
elseif request.guard ~= '' then
  return redis.error_reply('circuit_apply: unknown guard ' .. tostring(request.guard))
end

local version = actual + 1
redis.call('HSET', KEYS[1], 'version', string.format('%d', version), unpack(request.fields))
redis.call('SADD', KEYS[2], request.resource)

local parked = {}
if request.parked then
  parked = redis.call('ZRANGE', KEYS[3], 0, -1)
end
local event_id = ''
if request.event then
  event_id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', request.maxlen, '*',
    'version', string.format('%d', version), unpack(request.event))
end
return {1, version, parked, event_id}
