"""Reinforcement learning for graph optimization: PPO (Optax) and the GO trainers.

Public names::

    train_one(graph, cluster, tasks, *, steps, out_dir)     GO-one
    pretrain(graphs, clusters, tasks, *, steps, out_dir)    many graphs (on one or several clusters)
    data_parallel_pretrain(graphs, cluster, *, steps, out_dir, workers)
                                                            pretrain with W data-parallel workers
                                                            (jax.distributed processes, or emulated)
    finetune(checkpoint, graph, cluster, *, steps<=50, out_dir)
    infer(checkpoint, graph, cluster) -> InferResult        zero-shot (greedy, + confidence cuts,
                                                            + samples, + a climb of moves)
    policy_moves, DEFAULT_MOVES                             the moves a zero-shot decode tries
    policy_cuts, placement_cuts, fusion_cuts                the cuts it tries (hlo_go.rl.cuts)
    PLACEMENT_THRESHOLDS, FUSION_THRESHOLDS
    policy_decisions(checkpoint, name, graph, cluster)     zero-shot or fine-tuned decisions
    TeacherJob, Teacher, run_teacher, make_teachers(jobs, *, store, workers)
                                                            search teachers per (graph, cluster),
                                                            stored and resumable
    save_teacher, load_teacher, TeacherStoreError, TeacherJobError, STORE_VERSION
    revert_needless_changes(graph, cluster, found, start) -> (Decisions, Reverts)
                                                            a search's result less its needless changes
    train_imitation(teachers, config, *, steps) -> ImitationResult
                                                            imitation pre-training on teachers
    teacher_actions, teacher_agreement, imitation_loss, Imitator, make_examples, changed_weights
    canonical_devices(graph, cluster, decisions)          a teacher's devices numbered in graph order
    matched_placement, device_table                        a teacher's devices matched to the network's
    move_loss                                               the move head's listwise loss
    refine_moves(checkpoint, teachers, *, steps), decode_bases
                                                            the move head taught from its own decode
    MoveLabels, label_moves, best_move, climb_moves, largest_groups
                                                            single moves (hlo_go.rl.moves)
    TrainConfig, TrainResult, GraphResult, METRIC_COLUMNS, MAX_FINETUNE_STEPS
    GraphEnv, Scores, GOAgent, agent_for                    one graph on a cluster; the policy wired to PPO
    RewardConfig, reward, rewards, memory_ratio             -log(t / t_ref) with an OOM penalty
    Checkpoint, save_checkpoint, load_checkpoint            Flax msgpack checkpoints
    CheckpointMismatchError      a checkpoint of a newer format, another vocabulary, devices
    MetricsLogger, EventFileWriter, read_events, read_metrics   CSV + TensorBoard
    PPOConfig, PPOBatch, LossInfo                           generic PPO (any policy):
    ppo_loss, clipped_surrogate, value_loss, entropy_bonus, normalize_advantages
    make_optimizer, ppo_update_step, ppo_grads, ppo_apply, make_update_step, minibatch_epochs

Module by concept: :mod:`~hlo_go.rl.ppo` (generic PPO), :mod:`~hlo_go.rl.reward`,
:mod:`~hlo_go.rl.env` (a graph on a cluster), :mod:`~hlo_go.rl.agent` (batched GO
policy sampling and updates), :mod:`~hlo_go.rl.config`, :mod:`~hlo_go.rl.checkpoint`,
:mod:`~hlo_go.rl.metrics`, :mod:`~hlo_go.rl.trainer`, :mod:`~hlo_go.rl.teachers`,
:mod:`~hlo_go.rl.imitation` (teachers, then imitation, before PPO), :mod:`~hlo_go.rl.moves`
(single moves the move head is trained on and decodes with), :mod:`~hlo_go.rl.cuts`
(the network's placement and fusion probabilities cut at several confidence levels), :mod:`~hlo_go.rl.distributed`
(data-parallel pre-training, ``jax.distributed``), :mod:`~hlo_go.rl.compare`
(tables against baselines), :mod:`~hlo_go.cli.train` (``hlo-go train / finetune / infer``).
"""

from hlo_go.rl.agent import GOAgent
from hlo_go.rl.checkpoint import (
    Checkpoint,
    CheckpointMismatchError,
    load_checkpoint,
    save_checkpoint,
)
from hlo_go.rl.config import TrainConfig
from hlo_go.rl.cuts import FUSION_THRESHOLDS, PLACEMENT_THRESHOLDS, fusion_cuts, placement_cuts
from hlo_go.rl.distributed import data_parallel_pretrain
from hlo_go.rl.env import GraphEnv, Scores, check_tasks
from hlo_go.rl.imitation import (
    ImitationResult,
    Imitator,
    canonical_devices,
    changed_weights,
    decode_bases,
    device_table,
    imitation_loss,
    make_examples,
    matched_placement,
    move_loss,
    refine_moves,
    teacher_actions,
    teacher_agreement,
    train_imitation,
)
from hlo_go.rl.metrics import EventFileWriter, MetricsLogger, read_events, read_metrics
from hlo_go.rl.moves import MoveLabels, best_move, climb_moves, label_moves, largest_groups
from hlo_go.rl.ppo import (
    EvaluateFn,
    LossInfo,
    PPOBatch,
    PPOConfig,
    UpdateFn,
    clipped_surrogate,
    entropy_bonus,
    make_optimizer,
    make_update_step,
    minibatch_epochs,
    normalize_advantages,
    ppo_apply,
    ppo_grads,
    ppo_loss,
    ppo_update_step,
    value_loss,
)
from hlo_go.rl.reward import RewardConfig, memory_ratio, reward, rewards
from hlo_go.rl.teachers import (
    STORE_VERSION,
    Reverts,
    Teacher,
    TeacherJob,
    TeacherJobError,
    TeacherStoreError,
    load_teacher,
    make_teachers,
    revert_needless_changes,
    run_teacher,
    save_teacher,
)
from hlo_go.rl.trainer import (
    DEFAULT_MOVES,
    MAX_FINETUNE_STEPS,
    METRIC_COLUMNS,
    GraphResult,
    InferResult,
    TrainResult,
    agent_for,
    finetune,
    infer,
    policy_cuts,
    policy_decisions,
    policy_moves,
    pretrain,
    train_one,
)

__all__ = [
    "DEFAULT_MOVES",
    "FUSION_THRESHOLDS",
    "MAX_FINETUNE_STEPS",
    "METRIC_COLUMNS",
    "PLACEMENT_THRESHOLDS",
    "STORE_VERSION",
    "Checkpoint",
    "CheckpointMismatchError",
    "EvaluateFn",
    "EventFileWriter",
    "GOAgent",
    "GraphEnv",
    "GraphResult",
    "ImitationResult",
    "Imitator",
    "InferResult",
    "LossInfo",
    "MetricsLogger",
    "MoveLabels",
    "PPOBatch",
    "PPOConfig",
    "Reverts",
    "RewardConfig",
    "Scores",
    "Teacher",
    "TeacherJob",
    "TeacherJobError",
    "TeacherStoreError",
    "TrainConfig",
    "TrainResult",
    "UpdateFn",
    "agent_for",
    "best_move",
    "canonical_devices",
    "changed_weights",
    "check_tasks",
    "climb_moves",
    "clipped_surrogate",
    "data_parallel_pretrain",
    "decode_bases",
    "device_table",
    "entropy_bonus",
    "finetune",
    "fusion_cuts",
    "imitation_loss",
    "infer",
    "label_moves",
    "largest_groups",
    "load_checkpoint",
    "load_teacher",
    "make_examples",
    "make_optimizer",
    "make_teachers",
    "make_update_step",
    "matched_placement",
    "memory_ratio",
    "minibatch_epochs",
    "move_loss",
    "normalize_advantages",
    "placement_cuts",
    "policy_cuts",
    "policy_decisions",
    "policy_moves",
    "ppo_apply",
    "ppo_grads",
    "ppo_loss",
    "ppo_update_step",
    "pretrain",
    "read_events",
    "read_metrics",
    "refine_moves",
    "revert_needless_changes",
    "reward",
    "rewards",
    "run_teacher",
    "save_checkpoint",
    "save_teacher",
    "teacher_actions",
    "teacher_agreement",
    "train_imitation",
    "train_one",
    "value_loss",
]
