"""The HTTP API `recovery up` serves beside its runtime (actors/api/).

Before anything starts, `prepare_api` checks the API's settings: the address
(`api_address`, `off` for none), the tokens (`api_token`, `api_token_file`) and that an
address beyond loopback has a token (else `up` refuses to serve it), then binds the
socket, so a port in use is one line on stderr and exit 2 like any bad setting. Once the
runtime is up, `PreparedApi.serve` starts serving on that socket and returns when it
accepts requests; `up` prints `api: <url> (…)` and only then `ready: …`.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from actors.api import ApiBackend, TokenError, Tokens, create_app, load_tokens
from actors.api.metrics import ray_request_metrics
from actors.api.server import ApiServer, bind
from actors.engine.config import RuntimeConfig
from actors.engine.config_values import ApiAddress
from actors.errors import error_text
from actors.hosting.runtime import RecoveryRuntime


@dataclass
class PreparedApi:
    """The API's checked settings and bound socket, until `serve` hands them to a server."""

    address: ApiAddress
    listening: socket.socket
    tokens: Tokens = field(repr=False)
    server: ApiServer | None = None

    def serve(self, runtime: RecoveryRuntime) -> ApiServer:
        """Serve the API on the started runtime's handles and Redis; returns once it
        accepts requests."""
        app = create_app(
            ApiBackend.of_runtime(runtime), tokens=self.tokens, metrics=ray_request_metrics()
        )
        # `app.state.streams` is made by the app's startup, in the server's loop: looked
        # up when the server stops, not now.
        streams_stop = lambda: app.state.streams.stop()  # noqa: E731, PLW0108 - see above
        self.server = ApiServer(app, self.listening, self.address, stopping=streams_stop)
        return self.server.start()

    def line(self) -> str:
        """`up`'s line about the API (never a token)."""
        url = self.server.url if self.server is not None else self.address.url()
        if self.tokens.required:
            count = len(self.tokens.principals)
            noun = "token" if count == 1 else "tokens"
            return f"api: {url} (bearer {noun} required: {count}; docs: {url}/docs)"
        return f"api: {url} (no token: loopback only; docs: {url}/docs)"

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        self.listening.close()


def prepare_api(config: RuntimeConfig) -> PreparedApi | str | None:
    """The API ready to serve, None when it is `off`, or the problem as one line."""
    address = config.api()
    if address is None:
        return None
    try:
        tokens = load_tokens(config.api_token, config.api_token_file)
    except TokenError as error:
        return error_text(error)
    if not tokens.required and not address.loopback:
        return (
            f"api_address {address.host}:{address.port} is beyond loopback: set "
            "RECOVERY_API_TOKEN or RECOVERY_API_TOKEN_FILE (or serve on 127.0.0.1)"
        )
    try:
        listening = bind(address)
    except OSError as error:
        reason = error.strerror or str(error)
        return f"api_address {address.host}:{address.port}: cannot listen: {reason}"
    return PreparedApi(address, listening, tokens)
