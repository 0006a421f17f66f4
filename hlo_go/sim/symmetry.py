"""Device symmetries: the renumberings of a cluster's devices that leave it the same machine.

On a cluster of alike devices with alike links (``v100x4``, ``h100x8``), which device a
part of the graph runs on is a name, not a choice: moving every node of device 0 to
device 3 and every node of device 3 to device 0 changes nothing the simulator computes.
:func:`device_permutations` lists every such renumbering of a cluster, so that a learner
can compare two placements up to them (:mod:`hlo_go.rl.imitation`, ``match_devices``).

A permutation ``p`` (``int32[D]``, device ``i`` becomes device ``p[i]``) is a symmetry when

* every device ``i`` equals device ``p[i]`` (:class:`~hlo_go.sim.Device` fields, memory
  included);
* every link ``i → j`` has the bandwidth and latency of link ``p[i] → p[j]``;
* two links share a channel exactly when their images do (a channel is one physical path
  that transfers queue on; :class:`~hlo_go.sim.Link`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from hlo_go.sim.cluster import Cluster

MAX_PERMUTED_DEVICES = 8
"""The most devices :func:`device_permutations` enumerates the permutations of (8! =
40,320; the GO policy places on at most this many)."""


def _matrices(cluster: Cluster) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(bandwidth, latency, channel)`` as ``[D, D]`` arrays; the diagonal is 0, 0, -1, and
    a link with no channel name gets a channel id of its own."""
    d = cluster.num_devices
    bandwidth, latency = np.zeros((d, d)), np.zeros((d, d))
    channel = np.full((d, d), -1, np.int64)
    ids: dict[str, int] = {}
    for link in cluster.links:
        bandwidth[link.src, link.dst] = link.bandwidth
        latency[link.src, link.dst] = link.latency
        name = link.channel or f"\0{link.src}->{link.dst}"  # unnamed: a channel of its own
        channel[link.src, link.dst] = ids.setdefault(name, len(ids))
    return bandwidth, latency, channel


def _distinct_per_row(values: np.ndarray) -> np.ndarray:
    """``int64[Q]``: the number of distinct values in each row of ``values[Q, K]``."""
    ordered = np.sort(values, axis=1)
    return 1 + (np.diff(ordered, axis=1) != 0).sum(axis=1)


def device_permutations(cluster: Cluster) -> np.ndarray:
    """Every device renumbering that leaves ``cluster`` the same machine (module docstring).

    Args:
      cluster: a cluster of at most :data:`MAX_PERMUTED_DEVICES` devices.

    Returns:
      ``int32[Q, D]``, one permutation per row (``p[i]``: the device that device ``i``
      becomes), the identity first; ``Q`` is 1 where no two devices can be swapped and
      ``D!`` where all can.

    Raises:
      ValueError: more than :data:`MAX_PERMUTED_DEVICES` devices.
    """
    d = cluster.num_devices
    if d > MAX_PERMUTED_DEVICES:
        raise ValueError(
            f"cluster {cluster.name!r} has {d} devices; device permutations are enumerated "
            f"for at most {MAX_PERMUTED_DEVICES} ({math.factorial(MAX_PERMUTED_DEVICES)} of them)"
        )
    perms = np.asarray(list(itertools.permutations(range(d))), np.int64).reshape(-1, d)
    kinds = {device: k for k, device in enumerate(dict.fromkeys(cluster.devices))}
    kind = np.asarray([kinds[device] for device in cluster.devices])
    keep = (kind[perms] == kind).all(axis=1)
    bandwidth, latency, channel = _matrices(cluster)
    rows, cols = perms[:, :, None], perms[:, None, :]
    keep &= (bandwidth[rows, cols] == bandwidth).all(axis=(1, 2))
    keep &= (latency[rows, cols] == latency).all(axis=(1, 2))
    off = ~np.eye(d, dtype=bool)
    if off.any():
        mine = np.broadcast_to(channel[off], (len(perms), int(off.sum())))
        image = channel[rows, cols][:, off]
        pairs = mine * (channel.max() + 2) + image
        distinct = _distinct_per_row(mine[:1])[0]
        keep &= (_distinct_per_row(pairs) == distinct) & (_distinct_per_row(image) == distinct)
    return perms[keep].astype(np.int32)
