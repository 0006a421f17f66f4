"""Observations of a pass-ordering state: graph summary + pass history, as one vector.

Layout of :func:`observe` (``observation_size(num_actions)`` floats):

====================  =====================================================================
part                  values
====================  =====================================================================
graph summary         mean over OpGraph nodes of each of the ``NUM_FEATURES`` node features
                      (:data:`hlo_go.graph.FEATURE_NAMES`), then ``log1p(nodes) / 10`` and
                      ``op_count / initial_op_count``
history counts        per action: times applied so far / ``max_steps``
last action           one-hot of the previous action (all zero at the start)
progress              steps taken / ``max_steps``
====================  =====================================================================
"""

from __future__ import annotations

import collections
import hashlib
import threading

import numpy as np

from hlo_go.graph import NUM_FEATURES, build_graph
from hlo_go.hlo import parse_hlo
from hlo_go.passes.env import DEFAULT_CONFIG, PassEnvConfig, PassState

GRAPH_SUMMARY_SIZE = NUM_FEATURES + 2


def observation_size(num_actions: int) -> int:
    """Length of the observation vector for ``num_actions`` actions."""
    return GRAPH_SUMMARY_SIZE + 2 * num_actions + 1


_summaries: collections.OrderedDict[str, np.ndarray] = collections.OrderedDict()
_lock = threading.Lock()


def graph_summary(text: str) -> np.ndarray:
    """Mean OpGraph node features of a module, ``log1p(nodes)/10`` appended
    (memoized by module fingerprint); ``float32[NUM_FEATURES + 1]``."""
    key = hashlib.sha256(text.encode()).hexdigest()
    with _lock:
        cached = _summaries.get(key)
    if cached is not None:
        return cached
    graph = build_graph(parse_hlo(text))
    features = np.asarray(graph.features, dtype=np.float64)
    mean = features.mean(axis=0) if len(features) else np.zeros(NUM_FEATURES)
    summary = np.concatenate([mean, [np.log1p(graph.num_nodes) / 10.0]]).astype(np.float32)
    with _lock:
        _summaries[key] = summary
        while len(_summaries) > 4096:
            _summaries.popitem(last=False)
    return summary


def observe(state: PassState, config: PassEnvConfig = DEFAULT_CONFIG) -> np.ndarray:
    """The observation vector of ``state`` (see the module docstring)."""
    names = config.action_names
    index = {name: k for k, name in enumerate(names)}
    counts = np.zeros(len(names), np.float32)
    for name in state.history:
        if name in index:
            counts[index[name]] += 1.0
    last = np.zeros(len(names), np.float32)
    if state.history and state.history[-1] in index:
        last[index[state.history[-1]]] = 1.0
    relative = state.op_count / max(state.initial_op_count, 1)
    return np.concatenate(
        [
            graph_summary(state.text),
            np.asarray([relative], np.float32),
            counts / config.max_steps,
            last,
            np.asarray([len(state.history) / config.max_steps], np.float32),
        ]
    ).astype(np.float32)
