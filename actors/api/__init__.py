"""The HTTP API (FastAPI on uvicorn), served by `recovery up` (docs/CONTRACTS.md, HTTP API).

`create_app(backend, tokens=…)` builds the app on a runtime's route handles and Redis;
`ApiServer` serves it on a socket from a thread of its own, as `up` does.
"""

from actors.api.app import create_app
from actors.api.auth import TokenError, Tokens, load_tokens
from actors.api.backend import ApiBackend, RouteApi, Routes
from actors.api.problems import Problem, ProblemField

__all__ = [
    "ApiBackend",
    "Problem",
    "ProblemField",
    "RouteApi",
    "Routes",
    "TokenError",
    "Tokens",
    "create_app",
    "load_tokens",
]
