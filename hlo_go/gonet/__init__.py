"""The GO policy network (Flax + jraph): decisions for every node of an OpGraph.

Public names::

    GOPolicy(config)             .init / .sample / .greedy / .log_prob / .evaluate / .value
    PolicyConfig, TASKS          sizes and ablation switches
    PolicyInput, prepare_input   an OpGraph padded to its bucket, in topological order
    policy_bucket                the bucket (padded sizes) a graph runs at
    PolicyEvaluation, param_count
    GONetwork, NetworkOutput     the Flax module behind GOPolicy
    SageEncoder, SageLayer       GraphSAGE (mean + max-pool aggregators) over jraph
    SegmentRecurrentStack        Transformer-XL attention scanned over segments
    RelativeAttentionLayer, FeedForwardStack, relative_encoding, rel_shift
    GraphContext, FiLMGenerator  graph embedding and feature modulation
    ActionHead, ValueHead        output heads
    choose, choose_colocated     masked categoricals (sample / mode / score)
    colocated_log_probs          the distributions choose_colocated chooses from
    inverse_cdf_sample           one uniform per row -> one categorical draw
    bin_values, priorities_to_bins, fusion_bins, MASKED_LOGIT

Module by concept: :mod:`~hlo_go.gonet.config`, :mod:`~hlo_go.gonet.inputs`
(padding and topological relabeling), :mod:`~hlo_go.gonet.sage` (GraphSAGE),
:mod:`~hlo_go.gonet.attention` (segment-recurrent attention),
:mod:`~hlo_go.gonet.modulation` (FiLM), :mod:`~hlo_go.gonet.heads`,
:mod:`~hlo_go.gonet.actions` (distributions, colocation, bins),
:mod:`~hlo_go.gonet.network` (the model, as equations), :mod:`~hlo_go.gonet.policy`
(the jitted interface).
"""

from hlo_go.gonet.actions import (
    MASKED_LOGIT,
    Choice,
    bin_values,
    choose,
    choose_colocated,
    colocated_log_probs,
    fusion_bins,
    inverse_cdf_sample,
    priorities_to_bins,
)
from hlo_go.gonet.attention import (
    FeedForward,
    FeedForwardStack,
    RelativeAttentionLayer,
    SegmentRecurrentStack,
    film,
    rel_shift,
    relative_encoding,
)
from hlo_go.gonet.config import TASKS, PolicyConfig
from hlo_go.gonet.heads import ActionHead, ValueHead
from hlo_go.gonet.inputs import PolicyInput, policy_bucket, prepare_input
from hlo_go.gonet.modulation import FiLMGenerator, GraphContext
from hlo_go.gonet.network import GONetwork, NetworkOutput
from hlo_go.gonet.policy import GOPolicy, Params, PolicyEvaluation, param_count
from hlo_go.gonet.sage import SageEncoder, SageLayer

__all__ = [
    "MASKED_LOGIT",
    "TASKS",
    "ActionHead",
    "Choice",
    "FeedForward",
    "FeedForwardStack",
    "FiLMGenerator",
    "GONetwork",
    "GOPolicy",
    "GraphContext",
    "NetworkOutput",
    "Params",
    "PolicyConfig",
    "PolicyEvaluation",
    "PolicyInput",
    "RelativeAttentionLayer",
    "SageEncoder",
    "SageLayer",
    "SegmentRecurrentStack",
    "ValueHead",
    "bin_values",
    "choose",
    "choose_colocated",
    "colocated_log_probs",
    "film",
    "fusion_bins",
    "inverse_cdf_sample",
    "param_count",
    "policy_bucket",
    "prepare_input",
    "priorities_to_bins",
    "rel_shift",
    "relative_encoding",
]
