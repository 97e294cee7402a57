-- The dispatch ledger of one attempt (route, generation, attempt ordinal): queued ->
-- started -> finished, each step written once, except that an attempt whose dispatcher
-- answered NotDispatched is queued again for its redelivery. Redis 6.2 Lua.
-- KEYS: [1] the ledger hash
-- ARGV: [1] operation: "queue" | "start" | "finish"
--       [2] the moment, ISO-8601 UTC
--       [3] queue: the rq job id; start: the worker's name; finish: the outcome
--           ("delivered" | "not_dispatched" | "failed")
--       [4] finish: a safe detail ("" for none); queue: the route's redelivery count
--           (how many NotDispatched answers its route has recorded for the attempt);
--           start: ""
--       [5] seconds until the ledger expires (each write renews it)
--       [6..] finish: pairs of a fact's field name and its value, what the dispatcher
--           observed (its receiver's status, the latency); none for the other steps
-- Returns {1, state} when the step was written, else nothing is written and it returns
--         {0, current state} ("none" for a ledger never written).
-- "queue" creates a ledger, or queues again one finished `not_dispatched` whose
-- `returns` (the NotDispatched answers counted here) equals the route's redelivery count
-- (>= 1): the route has recorded that answer and scheduled this redelivery, so a queue
-- racing ahead of the route's own write is refused. "start" needs none or queued, so a
-- second start (a re-enqueued or duplicated job) is refused; "finish" needs started.
local found = redis.call('TYPE', KEYS[1]).ok
if found ~= 'none' and found ~= 'hash' then
  return redis.error_reply('WRONGTYPE dispatch_ledger: ' .. KEYS[1] .. ' holds a ' .. found)
end

local operation = ARGV[1]
local state = redis.call('HGET', KEYS[1], 'state') or 'none'

if operation == 'queue' then
  if state == 'finished' then
    local returns = tonumber(redis.call('HGET', KEYS[1], 'returns') or '0')
    local counted = tonumber(ARGV[4]) or 0
    local outcome = redis.call('HGET', KEYS[1], 'outcome')
    if outcome ~= 'not_dispatched' or counted < 1 or returns ~= counted then
      return {0, state}
    end
    redis.call('HDEL', KEYS[1], 'started_at', 'worker', 'finished_at', 'outcome', 'detail')
  elseif state ~= 'none' then
    return {0, state}
  end
  redis.call('HSET', KEYS[1], 'state', 'queued', 'queued_at', ARGV[2], 'job_id', ARGV[3])
elseif operation == 'start' then
  if state ~= 'none' and state ~= 'queued' then
    return {0, state}
  end
  redis.call('HSET', KEYS[1], 'state', 'started', 'started_at', ARGV[2], 'worker', ARGV[3])
elseif operation == 'finish' then
  if state ~= 'started' then
    return {0, state}
  end
  local outcome = ARGV[3]
  if outcome ~= 'delivered' and outcome ~= 'not_dispatched' and outcome ~= 'failed' then
    return redis.error_reply('dispatch_ledger: unknown outcome ' .. outcome)
  end
  redis.call('HDEL', KEYS[1], 'status', 'latency_ms', 'answer')  -- a redelivery's own
  redis.call('HSET', KEYS[1], 'state', 'finished', 'finished_at', ARGV[2],
    'outcome', outcome, 'detail', ARGV[4])
  for index = 6, #ARGV - 1, 2 do
    redis.call('HSET', KEYS[1], ARGV[index], ARGV[index + 1])
  end
  if outcome == 'not_dispatched' then
    redis.call('HINCRBY', KEYS[1], 'returns', 1)
  end
else
  return redis.error_reply('dispatch_ledger: unknown operation ' .. operation)
end

redis.call('EXPIRE', KEYS[1], ARGV[5])
return {1, redis.call('HGET', KEYS[1], 'state')}
