"""Pass ordering over XLA's own target-independent HLO passes.

Public names::

    reset(module) -> PassState               step(state, action, config) -> (state, reward, done, info)
    PassEnvConfig, PassState                 PassOrderingEnv (Gym-style wrapper)
    actions(), action_names()                PassAction, UnknownPassError
    unavailable_actions()                    catalog actions this process's XLA cannot run
    default_sequence(), default_order        XLA's default order (the baseline)
    random_search, greedy_search, beam_search, ppo_search     SearchResult
    Episode, record, run_actions, replay     ReplayError
    check_outputs -> OutputCheck             compile and run original vs optimized

The catalog's tables, the environment's cache and preparation, observations and the PPO
agent's types stay importable from here and from their modules but are not advertised.

Module by concept: :mod:`~hlo_go.passes.catalog` (the actions, resolved against
XLA's pipeline), :mod:`~hlo_go.passes.env` (pure reset/step),
:mod:`~hlo_go.passes.episode` (record and replay), :mod:`~hlo_go.passes.observe`
(observation vector), :mod:`~hlo_go.passes.gym` (Gym-style wrapper),
:mod:`~hlo_go.passes.search` (random, greedy, beam, default order),
:mod:`~hlo_go.passes.ppo` (the PPO agent), :mod:`~hlo_go.passes.check`
(outputs unchanged), :mod:`~hlo_go.cli.passes` (``hlo-go passes``). The XLA side
(running chosen passes, reading XLA's pipeline) is :mod:`hlo_go.xla.passes`.
"""

from hlo_go.passes.catalog import PREPARATION_PASSES as PREPARATION_PASSES
from hlo_go.passes.catalog import SPECS as SPECS
from hlo_go.passes.catalog import (
    PassAction,
    UnknownPassError,
    action_names,
    actions,
    default_sequence,
    unavailable_actions,
)
from hlo_go.passes.catalog import PassSpec as PassSpec
from hlo_go.passes.catalog import catalog_names as catalog_names
from hlo_go.passes.catalog import default_order_enabled as default_order_enabled
from hlo_go.passes.catalog import get_action as get_action
from hlo_go.passes.catalog import placements as placements
from hlo_go.passes.check import OutputCheck, check_outputs
from hlo_go.passes.check import Reference as Reference
from hlo_go.passes.check import reference_outputs as reference_outputs
from hlo_go.passes.env import CACHE as CACHE
from hlo_go.passes.env import DEFAULT_CONFIG as DEFAULT_CONFIG
from hlo_go.passes.env import PassEnvConfig, PassState, reset, step
from hlo_go.passes.env import fingerprint as fingerprint
from hlo_go.passes.env import prepare as prepare
from hlo_go.passes.env import run_default_order as run_default_order
from hlo_go.passes.episode import Episode, ReplayError, record, replay, run_actions
from hlo_go.passes.gym import PassOrderingEnv
from hlo_go.passes.observe import observation_size as observation_size
from hlo_go.passes.observe import observe as observe
from hlo_go.passes.ppo import PassPolicy as PassPolicy
from hlo_go.passes.ppo import PassPPOConfig as PassPPOConfig
from hlo_go.passes.ppo import ppo_search
from hlo_go.passes.search import (
    SearchResult,
    beam_search,
    default_order,
    greedy_search,
    random_search,
)
from hlo_go.passes.search import default_single_compile as default_single_compile

__all__ = [
    "Episode",
    "OutputCheck",
    "PassAction",
    "PassEnvConfig",
    "PassOrderingEnv",
    "PassState",
    "ReplayError",
    "SearchResult",
    "UnknownPassError",
    "action_names",
    "actions",
    "beam_search",
    "check_outputs",
    "default_order",
    "default_sequence",
    "greedy_search",
    "ppo_search",
    "random_search",
    "record",
    "replay",
    "reset",
    "run_actions",
    "step",
    "unavailable_actions",
]
