"""The asyncio machinery a route host or a job runs: the batch runner (the one write path),
the route service, circuit effects, timers, the runtime's settings with their loader, and
the transcript-notice lifecycle (session guards, notice writer and resolver, authoriser,
the orchestrator's plug-ins)."""
