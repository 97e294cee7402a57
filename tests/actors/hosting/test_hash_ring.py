"""The hash ring that picks a route's host: stable across processes, balanced, and
moving few routes when a host is added."""

from __future__ import annotations

import subprocess
import sys

import pytest

from actors.hosting.hash_ring import HashRing

HOSTS = ["host-0", "host-1"]
ROUTES = [f"session-{index}" for index in range(2000)]


def test_every_process_maps_a_route_to_the_same_host() -> None:
    code = (
        "from actors.hosting.hash_ring import HashRing\n"
        "print(HashRing(['host-0', 'host-1']).node_for('session-7'))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONHASHSEED": "12345"},
    )  # fmt: skip
    assert other.stdout.strip() == HashRing(HOSTS).node_for("session-7")


def test_routes_spread_over_both_hosts() -> None:
    ring = HashRing(HOSTS)
    on_first = sum(ring.node_for(route) == "host-0" for route in ROUTES)
    assert 0.3 * len(ROUTES) < on_first < 0.7 * len(ROUTES)


def test_adding_a_third_host_moves_only_routes_onto_it() -> None:
    two, three = HashRing(HOSTS), HashRing([*HOSTS, "host-2"])
    moved = [route for route in ROUTES if two.node_for(route) != three.node_for(route)]
    assert all(three.node_for(route) == "host-2" for route in moved)
    assert len(moved) < 0.5 * len(ROUTES)


@pytest.mark.parametrize(
    ("nodes", "virtual_nodes"), [([], 64), (["host-0", "host-0"], 64), (["host-0"], 0)]
)
def test_a_ring_without_distinct_nodes_or_points_is_refused(
    nodes: list[str], virtual_nodes: int
) -> None:
    with pytest.raises(ValueError, match=r"must|at least one"):
        HashRing(nodes, virtual_nodes=virtual_nodes)
