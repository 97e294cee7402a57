"""Consistent hashing of route ids onto route hosts.

Each host owns `virtual_nodes` points on a 64-bit ring; a route belongs to the first point
at or after its own hash. The hash is BLAKE2b (never the built-in `hash`, which is salted
per process), so every process that builds a ring from the same host ids agrees on every
route's owner, and adding a host moves only about 1/n of the routes.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Sequence
from typing import Final

DEFAULT_VIRTUAL_NODES: Final = 64


def ring_position(key: str) -> int:
    """A stable 64-bit position for `key`, the same in every process."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class HashRing:
    """Maps keys to nodes; immutable once built."""

    def __init__(self, nodes: Sequence[str], *, virtual_nodes: int = DEFAULT_VIRTUAL_NODES) -> None:
        if not nodes:
            raise ValueError("a hash ring needs at least one node, got none")
        if len(set(nodes)) != len(nodes):
            raise ValueError(f"hash ring nodes must be distinct, got {list(nodes)!r}")
        if virtual_nodes < 1:
            raise ValueError(f"virtual_nodes must be >= 1, got {virtual_nodes}")
        points = sorted(
            (ring_position(f"{node}#{replica}"), node)
            for node in nodes
            for replica in range(virtual_nodes)
        )
        self.nodes: tuple[str, ...] = tuple(nodes)
        self._positions = [position for position, _ in points]
        self._owners = [node for _, node in points]

    def node_for(self, key: str) -> str:
        index = bisect_left(self._positions, ring_position(key))
        return self._owners[index % len(self._owners)]
