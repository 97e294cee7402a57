-- One route transition, atomically: fence, route state, history, schedule, event.
-- A route that was never written has generation 0 and state "none". Redis 6.2 Lua.
-- KEYS: [1] route state hash
--       [2] attempt history list (append-only)
--       [3] the route's schedule hash
--       [4] schedule sorted set (member = route id, score = deadline epoch seconds)
--       [5] events stream
--       [6] the route's applied requests hash (request id -> the outcome's route fields)
--       [7] the route's applied request ids, oldest first (list)
--       [8] optional: the hosting actor's route index set
-- ARGV: [1] JSON object (decoded with cjson):
--         route        route id (the sorted-set and index member)
--         expected     the generation the caller saw
--         generation   the generation after the transition (expected or expected + 1, >= 1)
--         allowed      states the route may be in now
--         state        the state after the transition
--         fields       flat [name, value, ...] of every route field ("" = unset)
--         event_pairs  how many leading pairs of `fields` the event repeats
--         cause        what caused the transition (for the event)
--         decision     the attempt record's decision, or "" (for the event)
--         schedule     flat [name, value, ...] schedule hash fields, or [] to clear it
--         score        deadline in epoch seconds (a string), with a schedule
--         maxlen       approximate MAXLEN of the events stream
--         ttl          seconds until the route and its history expire; 0 = persist them
--                      (a schedule never expires: its hash and sorted-set entry change
--                      together, only here)
--         ordinal      optional: the attempt ordinal the route must still be at
--                      (absent = not checked)
--         request_id   optional: the caller's request id; a request already applied
--                      is not applied again (absent = not checked)
--         requests_keep  with request_id: how many applied ids a route keeps
--         requests_ttl   with request_id: seconds they are kept after the last one
--         unchanged    optional, a quarantine: {key index (1 route, 3 schedule), field};
--                      the fence is that field still holding the text ARGV[3] (absent
--                      reads as ""), instead of the generation, state and ordinal (which
--                      may be what cannot be read)
--         from_state   with unchanged: the state the event names as left (the stored
--                      one may be unreadable)
--       [2] the attempt record (JSON text) to append, or "" for none
--       [3] with unchanged: the text the field must still hold
-- Returns {1, generation, state} when applied, else nothing is written and it returns
--         {0, actual generation, actual state, "stale_generation" | "invalid_state"}, or
--         {0, actual generation, actual state, "stale_ordinal", actual attempt ordinal},
--         {0, actual generation, actual state, "stale_field"} (unchanged did not hold),
--         or {2, the first outcome (JSON: [generation, fields])} for a request applied before.
local request = cjson.decode(ARGV[1])

-- Redis does not roll a script back: refuse before the first write if any key holds
-- the wrong type, so an error never leaves half a transition behind.
local key_types = {'hash', 'list', 'hash', 'zset', 'stream', 'hash', 'list', 'set'}
for index, key in ipairs(KEYS) do
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= key_types[index] then
    return redis.error_reply('WRONGTYPE transition: ' .. key .. ' holds a ' .. found
      .. ', not a ' .. key_types[index])
  end
end

if request.request_id ~= nil then
  local first = redis.call('HGET', KEYS[6], request.request_id)
  if first then
    return {2, first}
  end
end

local current = redis.call('HMGET', KEYS[1], 'generation', 'state', 'attempt_ordinal')
local actual = tonumber(current[1]) or 0
local actual_state = current[2] or 'none'

local generation = request.generation
if request.unchanged ~= nil then
  local guard = request.unchanged
  local stored = redis.call('HGET', KEYS[guard[1]], guard[2]) or ''
  if stored ~= ARGV[3] then
    return {0, actual, actual_state, 'stale_field'}
  end
  actual = math.max(0, math.floor(actual))  -- the unreadable text may be any number
  actual_state = request.from_state
else
  if actual ~= request.expected then
    return {0, actual, actual_state, 'stale_generation'}
  end
  local allowed = false
  for _, state in ipairs(request.allowed) do
    if state == actual_state then
      allowed = true
      break
    end
  end
  if not allowed then
    return {0, actual, actual_state, 'invalid_state'}
  end
  if request.ordinal ~= nil then
    local actual_ordinal = tonumber(current[3]) or 0
    if actual_ordinal ~= request.ordinal then
      return {0, actual, actual_state, 'stale_ordinal', actual_ordinal}
    end
  end
  if generation ~= actual and generation ~= actual + 1 then
    return redis.error_reply('transition: generation ' .. tostring(generation)
      .. ' cannot follow ' .. tostring(actual))
  end
end
if generation < 1 then
  return redis.error_reply('transition: generation ' .. tostring(generation)
    .. ' cannot follow ' .. tostring(actual))
end
local generation_text = string.format('%d', generation)

redis.call('HSET', KEYS[1], 'generation', generation_text, unpack(request.fields))

if ARGV[2] ~= '' then
  redis.call('RPUSH', KEYS[2], ARGV[2])
end

if #request.schedule > 0 then
  redis.call('HSET', KEYS[3], unpack(request.schedule))  -- always every field
  redis.call('ZADD', KEYS[4], request.score, request.route)
else
  redis.call('DEL', KEYS[3])
  redis.call('ZREM', KEYS[4], request.route)
end

redis.call('XADD', KEYS[5], 'MAXLEN', '~', string.format('%d', request.maxlen), '*',
  'event', 'route.transition', 'cause', request.cause, 'decision', request.decision,
  'generation', generation_text, 'from_state', actual_state,
  'from_generation', string.format('%d', actual),
  unpack(request.fields, 1, 2 * request.event_pairs))

if request.ttl > 0 then
  local ttl = string.format('%d', request.ttl)
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[2])
end

if request.request_id ~= nil then
  redis.call('HSET', KEYS[6], request.request_id, cjson.encode({generation, request.fields}))
  redis.call('RPUSH', KEYS[7], request.request_id)
  while redis.call('LLEN', KEYS[7]) > request.requests_keep do
    redis.call('HDEL', KEYS[6], redis.call('LPOP', KEYS[7]))
  end
  local keep_for = string.format('%d', request.requests_ttl)
  redis.call('EXPIRE', KEYS[6], keep_for)
  redis.call('EXPIRE', KEYS[7], keep_for)
end

if #KEYS >= 8 then
  if request.state == 'closed' then
    redis.call('SREM', KEYS[8], request.route)
  else
    redis.call('SADD', KEYS[8], request.route)
  end
end

return {1, generation, request.state}
