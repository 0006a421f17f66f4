"""Pretrained GO policies shipped inside the package, so zero-shot works out of the box.

Each shipped policy is a small checkpoint (parameters only, no optimizer state):

* ``"v100x4"`` (also ``"default"``) and ``"h100x8"``, one policy: placement, scheduling
  and fusion on GPU presets of up to 8 devices, with a move head; what ``hlo-go eval``
  uses unless told otherwise. Trained by imitation (:func:`hlo_go.rl.train_imitation`) of
  simulated-annealing teachers on ``v100x4`` and ``h100x8`` (cluster features are inputs),
  124 corpus graphs each (base and variants up to 6,000 nodes) of 6 families, **gpt2 held
  out** so that its transfer to a family it never saw stays testable
  (``tests/test_shipped_policy.py``); zero-shot it decides greedily, tries confidence cuts
  of its probabilities and climbs along its move head's ranking (:func:`hlo_go.rl.infer`).
* ``"host-cpu"``: fusion and scheduling on one core of this kind of host; what
  :func:`hlo_go.jit` uses to decide what it lowers into XLA:CPU. Trained by imitation of
  simulated-annealing teachers on ``host-cpu-1-learned`` (kernels priced by the learned
  kernel cost model, :mod:`hlo_go.sim.learned`), 180 corpus graphs (base and variants up
  to 20,000 nodes) of 7 families, **bert and gnmt held out** (the learned cost model's
  held-out families too), so that its measured transfer stays testable
  (``python -m benchmarks host_policy``).

``python -m hlo_go.pretrained.ship RUN_DIR NAME`` turns a training run into a shipped
policy; the commands that trained these are in that module's docstring.

Beside them, ``sharding.msgpack`` is the pre-trained SPMD sharding policy
(:mod:`hlo_go.sharding.learned`, written by :mod:`hlo_go.sharding.pretrain`; its
docstring has the command): what ``hlo-go shard --method policy`` decodes zero-shot.
"""

from __future__ import annotations

from pathlib import Path

from hlo_go.rl.checkpoint import Checkpoint, checkpoint_path, load_checkpoint

# Shipped policy name -> file beside this module.
SHIPPED: dict[str, str] = {
    "v100x4": "go_gpu.msgpack",
    "h100x8": "go_gpu.msgpack",
    "host-cpu": "go_host_cpu.msgpack",
}
# The name "default" stands for this shipped policy.
DEFAULT = "v100x4"
# The shipped sharding policy's file (a hlo_go.sharding.learned.save_policy file).
SHARDING = "sharding.msgpack"


def sharding_policy_path() -> Path:
    """The shipped sharding policy's file (:func:`hlo_go.sharding.learned.shipped_policy`)."""
    path = Path(__file__).with_name(SHARDING)
    if not path.is_file():
        raise FileNotFoundError(
            f"the shipped sharding policy {path} is missing; train one with "
            "python -m hlo_go.sharding.pretrain (see its docstring)"
        )
    return path


def shipped_names() -> list[str]:
    """Names :func:`load_policy` accepts besides paths (``"default"`` included)."""
    return ["default", *SHIPPED]


def policy_path(policy: str | Path | None = None) -> Path:
    """The checkpoint file of a shipped policy name, a checkpoint file or a run directory.

    Args:
      policy: ``None`` or ``"default"``, a name of :data:`SHIPPED`, or a path.

    Returns:
      The checkpoint file's path.

    Raises:
      FileNotFoundError: neither a shipped name nor an existing checkpoint (the message
        lists the shipped names).
    """
    name = DEFAULT if policy in (None, "default") else policy
    if isinstance(name, str) and name in SHIPPED:
        path = Path(__file__).with_name(SHIPPED[name])
    else:
        path = checkpoint_path(Path(name))
    if not path.is_file():
        raise FileNotFoundError(
            f"no policy checkpoint {str(policy)!r} ({path}); shipped policies: "
            f"{', '.join(shipped_names())}, or give a checkpoint file or run directory"
        )
    return path


def load_policy(policy: str | Path | None = None) -> Checkpoint:
    """Loads a pretrained GO policy: a shipped one by name, or a checkpoint by path.

    The result is what :func:`hlo_go.rl.infer` and :func:`hlo_go.rl.finetune` take.

    Args:
      policy: ``None``/``"default"``, a shipped name (:func:`shipped_names`), a
        checkpoint file, or a run directory holding ``checkpoint.msgpack``.

    Returns:
      The :class:`hlo_go.rl.Checkpoint` (its ``config`` says the tasks and sizes it was
      trained with, its ``meta`` the cluster and graphs).

    Raises:
      FileNotFoundError: no such policy.
      ValueError: the file is not an hlo-go checkpoint.
    """
    return load_checkpoint(policy_path(policy))


__all__ = ["DEFAULT", "SHIPPED", "load_policy", "policy_path", "shipped_names"]
