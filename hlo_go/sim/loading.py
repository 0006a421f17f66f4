"""User-defined clusters from TOML or JSON files.

A file describes devices (optionally repeated with ``count``), per-pair links, and a
default link for the pairs not listed::

    name = "my-box"
    description = "2 x V100 on PCIe"

    [[devices]]
    name = "V100"
    count = 2
    peak_flops = { f32 = 15.7e12, f16 = 31.4e12 }   # FLOP/s per dtype class
    matrix_flops = { f16 = 125e12 }                  # optional: dot/convolution units
    memory_bandwidth = 900e9                         # bytes/s
    memory_capacity = 16e9                           # bytes
    launch_overhead = 5e-6                           # seconds per kernel
    # optional: transcendentals_per_s, compute_efficiency, memory_efficiency,
    # kernel_model (a learned kernel cost model: a shipped name or a file),
    # fuses_large_matrices (false: large dots and convolutions never fuse, as on XLA:CPU),
    # window_reads_per_s (a reduce-window's window reads per second; 0: by its flops)

    [default_link]                                   # every pair not in [[links]]
    bandwidth = 15.75e9
    latency = 10e-6
    channel = "pcie-{src}"                           # optional; {src}/{dst} filled in

    [[links]]
    src = 0
    dst = 1
    bandwidth = 50e9
    latency = 5e-6
    both_ways = true                                 # also adds the 1 -> 0 link

JSON files hold the same structure. :func:`cluster_to_dict` writes it back.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hlo_go.errors import HloGoError
from hlo_go.sim.cluster import MAX_DEVICES, Cluster, Device, Link

_DEVICE_KEYS = {
    "name",
    "count",
    "peak_flops",
    "matrix_flops",
    "memory_bandwidth",
    "memory_capacity",
    "launch_overhead",
    "transcendentals_per_s",
    "compute_efficiency",
    "memory_efficiency",
    "kernel_model",
    "fuses_large_matrices",
    "window_reads_per_s",
}
_LINK_KEYS = {"src", "dst", "bandwidth", "latency", "channel", "both_ways"}


class ClusterFileError(ValueError, HloGoError):
    """A cluster file that cannot be read; the message names the file and the entry."""


def _check_keys(entry: Any, allowed: set[str], where: str) -> Mapping[str, Any]:
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} must be a table/object, got {type(entry).__name__}")
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; allowed: {sorted(allowed)}")
    return entry


def _link(entry: Mapping[str, Any], where: str, src: int, dst: int) -> Link:
    for key in ("bandwidth", "latency"):
        if key not in entry:
            raise ValueError(f"{where}: missing {key!r}")
    channel = str(entry.get("channel", "")).format(src=src, dst=dst)
    return Link(src, dst, float(entry["bandwidth"]), float(entry["latency"]), channel)


def cluster_from_dict(data: Mapping[str, Any], *, default_name: str = "custom") -> Cluster:
    """A cluster from the structure the module docstring shows.

    Args:
      data: the parsed file.
      default_name: the name when ``data`` has none.

    Returns:
      The :class:`~hlo_go.sim.Cluster`.

    Raises:
      ValueError: naming the entry that is wrong (more than :data:`MAX_DEVICES` devices
        included).
    """
    data = _check_keys(
        data, {"name", "description", "devices", "links", "default_link"}, "the cluster"
    )
    devices: list[Device] = []
    raw_devices = data.get("devices")
    if not isinstance(raw_devices, list) or not raw_devices:
        raise ValueError("'devices' must be a non-empty list of device tables")
    total = 0
    for k, entry in enumerate(raw_devices):
        where = f"devices[{k}]"
        entry = dict(_check_keys(entry, _DEVICE_KEYS, where))
        count = entry.pop("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"{where}: count must be a positive integer, got {count!r}")
        total += count
        if total > MAX_DEVICES:  # before building any list of devices or links
            raise ValueError(
                f"{where}: count = {count} makes {total} devices; a cluster may have at most "
                f"{MAX_DEVICES}"
            )
        missing = {"peak_flops", "memory_bandwidth", "memory_capacity", "launch_overhead"} - set(
            entry
        )
        if missing:
            raise ValueError(f"{where}: missing {sorted(missing)}")
        entry.setdefault("name", f"device{k}")
        try:
            device = Device(**entry)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: {error}") from None
        devices.extend([device] * count)
    d = len(devices)
    links: dict[tuple[int, int], Link] = {}
    for k, entry in enumerate(data.get("links", [])):
        where = f"links[{k}]"
        entry = _check_keys(entry, _LINK_KEYS, where)
        try:
            src, dst = int(entry["src"]), int(entry["dst"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{where}: needs integer 'src' and 'dst'") from None
        pairs = [(src, dst), (dst, src)] if entry.get("both_ways") else [(src, dst)]
        for s, t in pairs:
            if not (0 <= s < d and 0 <= t < d) or s == t:
                raise ValueError(f"{where}: {s} -> {t} is not a pair of devices 0..{d - 1}")
            if (s, t) in links:
                raise ValueError(f"{where}: a link {s} -> {t} was already given")
            links[(s, t)] = _link(entry, where, s, t)
    default = data.get("default_link")
    if default is not None:
        default = _check_keys(default, _LINK_KEYS - {"src", "dst", "both_ways"}, "default_link")
        for s in range(d):
            for t in range(d):
                if s != t and (s, t) not in links:
                    links[(s, t)] = _link(default, "default_link", s, t)
    return Cluster(
        str(data.get("name", default_name)),
        tuple(devices),
        tuple(links[p] for p in sorted(links)),
        str(data.get("description", "")),
    )


def load_cluster(path: str | Path) -> Cluster:
    """Reads a cluster from a ``.toml`` or ``.json`` file.

    Args:
      path: the file; its suffix picks the format.

    Returns:
      The :class:`~hlo_go.sim.Cluster` (named after the file unless it names itself).

    Raises:
      FileNotFoundError: no such file.
      ClusterFileError: unreadable syntax or a wrong entry; the message names both.
    """
    path = Path(path)
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix == ".json":
            data = json.loads(text)
        else:
            raise ValueError(f"unknown suffix {path.suffix!r}: use .toml or .json")
        return cluster_from_dict(data, default_name=path.stem)
    except (ValueError, tomllib.TOMLDecodeError) as error:
        raise ClusterFileError(f"{path}: {error}") from None


def cluster_to_dict(cluster: Cluster) -> dict[str, Any]:
    """The file structure of a cluster (for ``json.dump``); :func:`cluster_from_dict`
    reads it back to an equal cluster."""
    devices = []
    for device in cluster.devices:
        entry: dict[str, Any] = {
            "name": device.name,
            "peak_flops": dict(device.peak_flops),
            "memory_bandwidth": device.memory_bandwidth,
            "memory_capacity": device.memory_capacity,
            "launch_overhead": device.launch_overhead,
        }
        for key in ("matrix_flops", "compute_efficiency", "memory_efficiency"):
            if getattr(device, key):
                entry[key] = dict(getattr(device, key))
        if device.transcendentals_per_s:
            entry["transcendentals_per_s"] = device.transcendentals_per_s
        if device.kernel_model:
            entry["kernel_model"] = device.kernel_model
        if not device.fuses_large_matrices:
            entry["fuses_large_matrices"] = False
        if device.window_reads_per_s:
            entry["window_reads_per_s"] = device.window_reads_per_s
        devices.append(entry)
    links = [
        {
            "src": link.src,
            "dst": link.dst,
            "bandwidth": link.bandwidth,
            "latency": link.latency,
            **({"channel": link.channel} if link.channel else {}),
        }
        for link in cluster.links
    ]
    return {
        "name": cluster.name,
        "description": cluster.description,
        "devices": devices,
        "links": links,
    }
