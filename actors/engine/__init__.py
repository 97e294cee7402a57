"""The asyncio machinery a route host or a job runs: the batch runner (the one write path),
the route service, circuit effects, timers, and the runtime's settings with their loader."""
