"""A process that owns (or reattaches to) an embedded Redis, for the data folder's lock
tests: `python -m tests.actors.store.embedded_holder FOLDER` starts EmbeddedRedis(FOLDER),
writes its own pid under `holder:<pid>` through it, prints one JSON line (`url`, `owner`,
`server_pid`) and holds on until the test closes its stdin or kills it. An error is
printed as `{"error": ...}`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import redis

from actors.store.embedded import EmbeddedRedis


def main(folder: str) -> None:
    server = EmbeddedRedis(Path(folder))
    try:
        url = server.start()
        client = redis.Redis.from_url(url)
        client.set(f"holder:{os.getpid()}", "written")
        client.close()
    except Exception as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
        return
    owner = getattr(server, "owner", None)  # getattr: the same script runs before the fix
    server_pid = getattr(server, "pid", None)
    print(json.dumps({"url": url, "owner": owner, "server_pid": server_pid}), flush=True)
    sys.stdin.read()  # held until the test closes its end (or kills this process)


if __name__ == "__main__":
    main(sys.argv[1])
