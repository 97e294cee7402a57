"""The names of an installation's Ray actors, and which of them owns what.

Route hosts own routes and circuit hosts own circuits, each by consistent hashing
(actors/hosting/hash_ring.py) of the route id or the circuit's resource id, so every
process (an owner, an attached client, a circuit host releasing routes) that builds the
same ring agrees on every owner. The actors are named in one Ray namespace, so they show
by name on the Ray dashboard and any process of the cluster finds them.
"""

from __future__ import annotations

from typing import Final

from actors.hosting.hash_ring import DEFAULT_VIRTUAL_NODES, HashRing

NAMESPACE: Final = "provider-recovery"


def host_name(prefix: str, index: int) -> str:
    """The Ray actor name of route host `index` of the installation under `prefix`."""
    return f"route-host:{prefix}:{index}"


def host_id(index: int) -> str:
    return f"host-{index}"


def host_ids(count: int) -> list[str]:
    return [host_id(index) for index in range(count)]


def circuit_host_name(prefix: str, index: int) -> str:
    """The Ray actor name of circuit host `index` of the installation under `prefix`."""
    return f"circuit-host:{prefix}:{index}"


class Owners:
    """Which host of a pool owns a key: route hosts by route id, circuit hosts by
    resource id (`kind` keeps the two rings apart)."""

    def __init__(self, count: int, *, kind: str, virtual_nodes: int = DEFAULT_VIRTUAL_NODES):
        ids = host_ids(count) if kind == "route" else [f"circuit-{i}" for i in range(count)]
        self._ring = HashRing(ids, virtual_nodes=virtual_nodes)
        self._index = {node: i for i, node in enumerate(self._ring.nodes)}

    def __len__(self) -> int:
        return len(self._index)

    def index_of(self, key: str) -> int:
        return self._index[self._ring.node_for(key)]
