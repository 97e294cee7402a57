"""Route hosts on a two-node Ray cluster, for tests/actors/hosting/test_installation.py.

    python -m tests.actors.hosting.placement_probe URL PREFIX

Starts a two-node `ray.cluster_utils.Cluster` (its own, in this process), an owning
runtime of two hosts on it, prints one JSON line with the node each host runs on and the
cluster's node count, and stops everything it started.
"""

from __future__ import annotations

import json
import sys

import ray
from ray.cluster_utils import Cluster

from actors.hosting.names import NAMESPACE
from actors.hosting.runtime import RecoveryRuntime


def main(url: str, prefix: str) -> None:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False)
        runtime = RecoveryRuntime(redis_url=url, key_prefix=prefix, host_count=2).start()
        try:
            nodes = ray.get([host.node_id.remote() for host in runtime.hosts])
            alive = [node for node in ray.nodes() if node["Alive"]]  # type: ignore[no-untyped-call]  # Ray ships it untyped
            print(json.dumps({"host_nodes": nodes, "cluster_nodes": len(alive)}))
        finally:
            runtime.shutdown()
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]  # Ray ships it untyped


if __name__ == "__main__":
    main(*sys.argv[1:3])
