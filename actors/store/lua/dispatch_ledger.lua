-- The dispatch ledger of one attempt (route, generation, attempt ordinal): one-way
-- queued -> started -> finished, each step written once. Redis 6.2 Lua.
-- KEYS: [1] the ledger hash
-- ARGV: [1] operation: "queue" | "start" | "finish"
--       [2] the moment, ISO-8601 UTC
--       [3] queue: the rq job id; start: the worker's name; finish: the outcome
--           ("delivered" | "not_dispatched" | "failed")
--       [4] finish: a safe detail ("" for none); otherwise ""
--       [5] seconds until the ledger expires (each write renews it)
-- Returns {1, state} when the step was written, else nothing is written and it returns
--         {0, current state} ("none" for a ledger never written).
-- "queue" only creates a ledger; "start" needs none or queued, so a second start (a
-- re-enqueued or duplicated job) is refused; "finish" needs started.
local found = redis.call('TYPE', KEYS[1]).ok
if found ~= 'none' and found ~= 'hash' then
  return redis.error_reply('WRONGTYPE dispatch_ledger: ' .. KEYS[1] .. ' holds a ' .. found)
end

local operation = ARGV[1]
local state = redis.call('HGET', KEYS[1], 'state') or 'none'

if operation == 'queue' then
  if state ~= 'none' then
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
  redis.call('HSET', KEYS[1], 'state', 'finished', 'finished_at', ARGV[2],
    'outcome', outcome, 'detail', ARGV[4])
else
  return redis.error_reply('dispatch_ledger: unknown operation ' .. operation)
end

redis.call('EXPIRE', KEYS[1], ARGV[5])
return {1, redis.call('HGET', KEYS[1], 'state')}
