"""Tests of hlo_go.sim.symmetry: the device renumberings that leave a cluster the same
machine, checked against the simulator (a renumbered placement simulates identically)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hlo_go.decisions import Decisions
from hlo_go.graph import build_graph
from hlo_go.hlo import load_hlo
from hlo_go.sim import Cluster, Link, get_cluster, host_cpu, simulate
from hlo_go.sim.symmetry import MAX_PERMUTED_DEVICES, device_permutations


@pytest.fixture(scope="module")
def graph():
    from hlo_go.examples import example_path

    return build_graph(load_hlo(example_path()))


def _is_permutation_table(perms: np.ndarray, devices: int) -> bool:
    rows = {tuple(p) for p in perms.tolist()}
    return len(rows) == len(perms) and all(sorted(p) == list(range(devices)) for p in rows)


@pytest.mark.parametrize(
    ("preset", "count"),
    [("v100x4", 24), ("h100x8", 40320), ("p100x2", 2), ("host-cpu-1", 1), ("tpu-v4-8", 4)],
)
def test_alike_devices_and_links_can_be_renumbered_freely(preset, count):
    cluster = get_cluster(preset)
    perms = device_permutations(cluster)
    assert perms.shape == (count, cluster.num_devices) and perms.dtype == np.int32
    assert _is_permutation_table(perms, cluster.num_devices)
    np.testing.assert_array_equal(perms[0], np.arange(cluster.num_devices))


def test_a_different_device_or_link_breaks_the_symmetry():
    cluster = get_cluster("v100x4")
    slow = dataclasses.replace(
        cluster.devices[0], memory_capacity=cluster.devices[0].memory_capacity / 2
    )
    perms = device_permutations(dataclasses.replace(cluster, devices=(slow, *cluster.devices[1:])))
    assert len(perms) == 6 and (perms[:, 0] == 0).all()  # device 0 stays; 1-3 swap freely
    # one slow link 0 -> 1: only renumberings that keep that ordered pair remain
    links = tuple(
        dataclasses.replace(link, bandwidth=link.bandwidth / 10)
        if (link.src, link.dst) == (0, 1)
        else link
        for link in cluster.links
    )
    perms = device_permutations(dataclasses.replace(cluster, links=links))
    assert len(perms) == 2 and (perms[:, 0] == 0).all() and (perms[:, 1] == 1).all()


def test_shared_channels_must_map_onto_shared_channels():
    device = host_cpu(1).devices[0]

    def cluster(channels: dict[tuple[int, int], str]) -> Cluster:
        links = tuple(
            Link(i, j, 1e10, 1e-6, channels.get((i, j), ""))
            for i in range(3)
            for j in range(3)
            if i != j
        )
        return Cluster("three", (device,) * 3, links)

    assert len(device_permutations(cluster({}))) == 6
    # 0 -> 1 and 0 -> 2 share device 0's uplink: device 0 is special, 1 and 2 swap
    perms = device_permutations(cluster({(0, 1): "up0", (0, 2): "up0"}))
    assert sorted(map(tuple, perms.tolist())) == [(0, 1, 2), (0, 2, 1)]


def test_renumbered_placements_simulate_identically(graph):
    rng = np.random.default_rng(0)
    for preset in ("v100x4", "tpu-v4-8", "v100x8", "h100x8"):
        cluster = get_cluster(preset)
        perms = device_permutations(cluster)
        by_group = rng.integers(0, cluster.num_devices, graph.num_nodes).astype(np.int32)
        placement = by_group[graph.colocation_group]
        decisions = Decisions.default(graph)._replace(placement=placement)
        want = simulate(graph, cluster, decisions)
        for perm in perms[rng.permutation(len(perms))[:5]]:
            got = simulate(graph, cluster, decisions._replace(placement=perm[placement]))
            assert got.step_time == pytest.approx(want.step_time, rel=1e-9), (preset, perm)
            assert got.oom == want.oom


def test_too_many_devices_are_refused():
    device = host_cpu(1).devices[0]
    n = MAX_PERMUTED_DEVICES + 1
    links = tuple(Link(i, j, 1e10, 1e-6) for i in range(n) for j in range(n) if i != j)
    cluster = Cluster("nine", (device,) * n, links)
    with pytest.raises(ValueError, match="at most 8"):
        device_permutations(cluster)
