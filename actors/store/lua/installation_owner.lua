-- The owner lease of an installation: one token at a time, with a TTL its holder renews.
-- KEYS: [1] the owner key
-- ARGV: [1] "claim", "renew" or "release"
--       [2] the caller's token
--       [3] the lease's TTL in milliseconds (claim, renew)
-- Returns 1 when done; 0 when another token holds the lease (claim) or the caller does
-- not hold it (renew, release). A claim by the holder renews it.
local holder = redis.call('GET', KEYS[1])
local action, token = ARGV[1], ARGV[2]
if action == 'claim' then
  if holder and holder ~= token then
    return 0
  end
  redis.call('SET', KEYS[1], token, 'PX', ARGV[3])
  return 1
end
if holder ~= token then
  return 0
end
if action == 'renew' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
else
  redis.call('DEL', KEYS[1])
end
return 1
