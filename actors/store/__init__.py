"""What knows the Redis layout beyond key names: codecs, the Lua scripts and their runner,
the route and circuit stores, the transcript port and its Redis implementation, and the
embedded redis-server."""
