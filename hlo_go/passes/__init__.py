"""Pass ordering over XLA's own target-independent HLO passes.

Public names::

    reset(module) -> PassState               step(state, action, config) -> (state, reward, done, info)
    PassEnvConfig, PassState, prepare        PassOrderingEnv (Gym-style wrapper), observe
    actions(), action_names(), get_action    PassAction, PassSpec, UnknownPassError
    default_sequence(), default_order        XLA's default order (the baseline)
    random_search, greedy_search, beam_search, ppo_search     SearchResult
    Episode, record, run_actions, replay     ReplayError
    check_outputs -> OutputCheck             compile and run original vs optimized (reference_outputs)

Module by concept: :mod:`~hlo_go.passes.catalog` (the actions, resolved against
XLA's pipeline), :mod:`~hlo_go.passes.env` (pure reset/step),
:mod:`~hlo_go.passes.episode` (record and replay), :mod:`~hlo_go.passes.observe`
(observation vector), :mod:`~hlo_go.passes.gym` (Gym-style wrapper),
:mod:`~hlo_go.passes.search` (random, greedy, beam, default order),
:mod:`~hlo_go.passes.ppo` (the PPO agent), :mod:`~hlo_go.passes.check`
(outputs unchanged), :mod:`~hlo_go.cli.passes` (``hlo-go passes``). The XLA side
(running chosen passes, reading XLA's pipeline) is :mod:`hlo_go.xla.passes`.
"""

from hlo_go.passes.catalog import (
    PREPARATION_PASSES,
    SPECS,
    PassAction,
    PassSpec,
    UnknownPassError,
    action_names,
    actions,
    default_order_enabled,
    default_sequence,
    get_action,
    placements,
)
from hlo_go.passes.check import OutputCheck, Reference, check_outputs, reference_outputs
from hlo_go.passes.env import (
    CACHE,
    DEFAULT_CONFIG,
    PassEnvConfig,
    PassState,
    fingerprint,
    prepare,
    reset,
    run_default_order,
    step,
)
from hlo_go.passes.episode import Episode, ReplayError, record, replay, run_actions
from hlo_go.passes.gym import PassOrderingEnv
from hlo_go.passes.observe import observation_size, observe
from hlo_go.passes.ppo import PassPolicy, PassPPOConfig, ppo_search
from hlo_go.passes.search import (
    SearchResult,
    beam_search,
    default_order,
    default_single_compile,
    greedy_search,
    random_search,
)

__all__ = [
    "CACHE",
    "DEFAULT_CONFIG",
    "PREPARATION_PASSES",
    "SPECS",
    "Episode",
    "OutputCheck",
    "PassAction",
    "PassEnvConfig",
    "PassOrderingEnv",
    "PassPPOConfig",
    "PassPolicy",
    "PassSpec",
    "PassState",
    "Reference",
    "ReplayError",
    "SearchResult",
    "UnknownPassError",
    "action_names",
    "actions",
    "beam_search",
    "check_outputs",
    "default_order",
    "default_order_enabled",
    "default_sequence",
    "default_single_compile",
    "fingerprint",
    "get_action",
    "greedy_search",
    "observation_size",
    "observe",
    "placements",
    "ppo_search",
    "prepare",
    "random_search",
    "record",
    "reference_outputs",
    "replay",
    "reset",
    "run_actions",
    "run_default_order",
    "step",
]
