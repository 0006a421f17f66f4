"""What :func:`hlo_go.jit` decided for one input signature, and why (``.explain()``)."""

from __future__ import annotations

from typing import Any, NamedTuple

# The two executables a signature can keep.
HLO_GO = "hlo-go"
JAX_JIT = "jax.jit"


class Record(NamedTuple):
    """One input signature's decision.

    Attributes:
      signature: the dynamic arguments' shapes and dtypes (and static values), as text.
      kept: :data:`HLO_GO` (our lowered executable) or :data:`JAX_JIT` (the fallback).
      reason: why that one was kept (a failure's message, a measured loss, ...).
      source: ``"decided"`` in this process, or ``"cache"`` (reused from the disk cache).
      fingerprint: the cache key (sha256 of the lowered HLO and the options), or ``""``.
      method: who decided (policy, search or baseline), or ``""``.
      correct: outputs matched ``jax.jit``'s (None: not checked).
      jit_time_s: measured median of ``jax.jit``'s executable (None: not measured).
      hlo_go_time_s: measured median of ours (None: not measured).
      simulated_s: the simulator's step time of the decisions on the options' cluster.
      fusions: fusion kernels in our compiled executable (None: not lowered).
      nodes: nodes of the pre-fusion graph decided for (None: not built).
      decide_s: seconds spent deciding every candidate (policy, heuristics, legality),
        without the policy's one-time compile and the heuristics' warm-up.
      compile_s: seconds spent lowering and compiling the candidates.
      candidate: the candidate kept, or the best measured (a name of
        :attr:`Options.candidates`).
      candidates: what happened to each candidate, one ``name: outcome`` per ``; ``.
      speedup_lower: lower confidence bound of the speedup (None: not measured).
      rounds: interleaved timing rounds run.
      clock: ``"cpu"`` or ``"wall"`` (None: not measured).
      measure_s: seconds spent timing.
      policy_compile_s: seconds of the policy's one-time compile in this process that
        fell on this signature (0: none).
      warmup_s: seconds of the heuristics' one-time warm-up in this process that fell
        on this signature (loading their compiled kernels, :func:`hlo_go.api.decide.warm_up`;
        0: none).
      kept_decisions: the cache holds decisions for this entry.
      checked_on: ``"call inputs"``, or ``"redrawn finite inputs"`` when the call's held
        NaN or infinity.
    """

    signature: str
    kept: str
    reason: str
    source: str = "decided"
    fingerprint: str = ""
    method: str = ""
    correct: bool | None = None
    jit_time_s: float | None = None
    hlo_go_time_s: float | None = None
    simulated_s: float | None = None
    fusions: int | None = None
    nodes: int | None = None
    decide_s: float | None = None
    compile_s: float | None = None
    candidate: str = ""
    candidates: str = ""
    speedup_lower: float | None = None
    rounds: int = 0
    clock: str | None = None
    measure_s: float | None = None
    policy_compile_s: float = 0.0
    warmup_s: float = 0.0
    kept_decisions: bool = False
    checked_on: str = ""

    @property
    def speedup(self) -> float | None:
        """``jit_time_s / hlo_go_time_s`` (> 1: ours is faster), when both were measured."""
        if self.jit_time_s is None or not self.hlo_go_time_s:
            return None
        return self.jit_time_s / self.hlo_go_time_s

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly fields (the disk cache's verdict file)."""
        return self._asdict()

    def describe(self, *, signature_chars: int | None = None) -> str:
        """A few lines a person reads: what was decided, measured and kept, and why.

        Args:
          signature_chars: show at most this many characters of the signature (its start
            and end, the elision said); None: the whole signature.
        """
        signature = self.signature
        if signature_chars is not None and len(signature) > signature_chars:
            half = max(1, signature_chars // 2)
            cut = len(signature) - 2 * half
            signature = f"{signature[:half]} ...({cut} characters)... {signature[-half:]}"
        lines = [f"signature {signature}: kept {self.kept} ({self.source})"]
        if self.method:
            lines.append(f"  decided by: {self.method}")
        if self.candidates:
            lines.append(f"  candidates: {self.candidates}")
        if self.nodes is not None:
            lines.append(f"  pre-fusion graph: {self.nodes} nodes")
        if self.simulated_s is not None:
            lines.append(f"  simulated step: {self.simulated_s * 1e3:.4g} ms")
        if self.fusions is not None:
            lines.append(f"  lowered: {self.fusions} fusion kernels; outputs match jax.jit: "
                         f"{self.correct}" + (f" (on {self.checked_on})" if self.checked_on
                                              else ""))  # fmt: skip
        if self.jit_time_s is not None and self.hlo_go_time_s is not None:
            lines.append(
                f"  measured: jax.jit {self.jit_time_s * 1e6:.1f} us, hlo-go "
                f"{self.hlo_go_time_s * 1e6:.1f} us (speedup {self.speedup:.3f}x"
                + (f", lower bound {self.speedup_lower:.3f}x" if self.speedup_lower else "")
                + f"; {self.rounds} interleaved rounds, {self.clock} clock)"
            )
        timing = []
        if self.decide_s is not None:
            timing.append(f"decide {self.decide_s:.2f} s")
        if self.policy_compile_s:
            timing.append(f"policy compile {self.policy_compile_s:.2f} s (once per process)")
        if self.warmup_s:
            timing.append(f"heuristics' warm-up {self.warmup_s:.2f} s (once per process)")
        if self.compile_s is not None:
            timing.append(f"lower+compile {self.compile_s:.2f} s")
        if self.measure_s is not None:
            timing.append(f"measure {self.measure_s:.2f} s")
        if timing:
            lines.append("  cost: " + ", ".join(timing))
        lines.append(f"  why: {self.reason}")
        return "\n".join(lines)
