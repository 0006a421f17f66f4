"""Timing helpers shared by hlo_go.xla.measure and the benchmarks.

Configurations are timed interleaved in one process (A B C, B C A, ...), after warm-up,
with the garbage collector disabled inside each timed call, and are summarized by
their median. Compare configurations by the ratio of medians, not by lone
absolute times: this host's speed drifts from minute to minute, and interleaving
spreads the drift over every configuration alike.

Two clocks (:data:`CLOCKS`): ``"wall"`` (``time.perf_counter``, what a user waits) and
``"cpu"`` (``time.process_time``: user + system time of every thread of this process).
On a shared host, a process pinned to one core (:func:`pin_to_cpu`) measures its own
work by CPU time even while other processes take turns on that core, when wall time
would count their turns too.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from hlo_go.errors import HloGoError

Clock = Literal["wall", "cpu"]
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def pin_to_cpu(cpu: int) -> None:
    """Restricts this process (and the threads it starts later) to one CPU core.

    Call it before JAX creates its CPU client: XLA sizes its thread pools from the
    cores the process may use, so a pinned process runs every kernel on that one core.

    Args:
      cpu: the core's number (``os.sched_getaffinity`` lists the allowed ones).

    Raises:
      ValueError: the core is not one this process may use.
    """
    import os

    allowed = os.sched_getaffinity(0)
    if cpu not in allowed:
        raise ValueError(f"cannot pin to CPU {cpu}: this process may use {sorted(allowed)}")
    os.sched_setaffinity(0, {cpu})


def default_cpu() -> int:
    """The core pinned measurements use: the highest-numbered one this process may use."""
    import os

    return max(os.sched_getaffinity(0))


CHILD_STACK_BYTES = 1 << 30
"""Stack limit a pinned child starts with (1 GiB; the usual default is 8 MiB). glibc
sizes every thread's stack from this limit, read when the process starts, and XLA
compiles on its own threads: the compile of a 57,962-node unrolled GNMT step
overflowed an 8 MiB thread stack (a segfault at the stack pointer). The stacks are
reserved address space, touched only as deep as a thread goes."""


class MeasureTimeoutError(TimeoutError, HloGoError):
    """A measuring child process ran past its limit and was ended."""


DEFAULT_TIMEOUT_FLOOR = 60.0
"""CPU seconds a measuring child's runs always get under :func:`deadline_after`."""

DEFAULT_TIMEOUT_FACTOR = 50.0
""":func:`deadline_after`'s allowance per run: this many times the reference's run time."""

COMPILE_FACTOR = 20.0
""":func:`deadline_after`'s allowance for lowering and compiling the variants: this many
times the reference's compile time."""


def arm_deadline(seconds: float | None) -> None:
    """Ends this process after ``seconds`` more CPU seconds (None: disarms).

    Meant for a measuring child pinned to one core (:func:`in_pinned_process`): the limit
    counts this process's own CPU time, not other processes' turns on a busy host. A
    watchdog thread reads the process's CPU time every :data:`WATCHDOG_PERIOD_S` and, past
    the limit, sends the process ``SIGXCPU``, whose default action ends it even while XLA
    runs native code (which releases Python's lock while it compiles and runs).
    :func:`in_pinned_process` reports that end as a :class:`MeasureTimeoutError`.

    The kernel's own CPU-time limit (``RLIMIT_CPU``) is not used: while a process has one,
    Linux reads the process's CPU clock from a total updated only at each scheduler tick,
    so ``time.process_time`` (the ``"cpu"`` clock) moves in steps of a tick (4 ms at 250
    Hz) and a call shorter than that times as 0.

    Args:
      seconds: the CPU seconds left from now, or None.
    """
    import signal

    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    with _WATCHDOG_LOCK:
        _watchdog["limit"] = None if seconds is None else time.process_time() + seconds
        if seconds is not None and _watchdog["thread"] is None:
            thread = threading.Thread(target=_watch_cpu_time, name="hlo-go-deadline", daemon=True)
            _watchdog["thread"] = thread
            thread.start()


WATCHDOG_PERIOD_S = 0.25
"""How often :func:`arm_deadline`'s watchdog reads the process's CPU time (seconds)."""

_WATCHDOG_LOCK = threading.Lock()
_watchdog: dict[str, Any] = {"limit": None, "thread": None}


def _watch_cpu_time() -> None:
    import os
    import signal

    while True:
        time.sleep(WATCHDOG_PERIOD_S)
        limit = _watchdog["limit"]
        if limit is not None and time.process_time() > limit:
            os.kill(os.getpid(), signal.SIGXCPU)
            return


def deadline_after(
    reference: Callable[[], Any],
    *,
    runs: int,
    compile_s: float = 0.0,
    floor: float = DEFAULT_TIMEOUT_FLOOR,
    factor: float = DEFAULT_TIMEOUT_FACTOR,
) -> float:
    """Runs ``reference`` once under a ``floor`` deadline, then arms this process's
    deadline in proportion to it (:func:`arm_deadline`, CPU seconds).

    The limit is ``COMPILE_FACTOR * compile_s + max(floor, factor * run_s * runs)``.

    Args:
      reference: one run of the reference (XLA's default compile), already compiled.
      runs: the runs the measurement will make, every configuration together.
      compile_s: CPU seconds the reference took to compile.
      floor: the least CPU time the runs get, seconds.
      factor: the allowance per run, in reference run times.

    Returns:
      The limit armed, CPU seconds from now.
    """
    arm_deadline(floor)
    start = time.process_time()
    reference()
    run_s = time.process_time() - start
    limit = COMPILE_FACTOR * compile_s + max(floor, factor * run_s * runs)
    arm_deadline(limit)
    return limit


def _child_main(
    conn: Any, cpu: int, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict
) -> None:
    """A measuring child's body: pin, call, send ``(ok, result or error)`` back."""
    import faulthandler
    import pickle

    faulthandler.enable()  # a crash in XLA prints the Python stack that led to it
    try:
        pin_to_cpu(cpu)
        reply: tuple[bool, Any] = (True, fn(*args, **kwargs))
    except BaseException as error:  # sent to the parent, which raises it
        reply = (False, error)
    try:
        pickle.dumps(reply[1])
    except Exception as why:  # an unpicklable result or error: its description instead
        reply = (False, RuntimeError(f"{type(reply[1]).__name__}: {reply[1]} ({why})"))
    conn.send(reply)
    conn.close()


_SPAWN_LOCK = threading.Lock()

# glibc malloc settings under which freed memory stays in the process for the next call
# (``Allocator`` ``"retain"``). XLA:CPU allocates every call's temporary buffer afresh;
# glibc serves such large blocks with ``mmap`` and returns them on free, so each call
# page-faults its whole temporary buffer in again (measured on this host, jaxlib 0.10.2:
# 0.26 s of gpt2_l2's 2.6 s step and 0.11 s of resnet_26's 0.60 s were system time, about
# 0.5 ms per MB of temporaries). With ``mmap`` off, one arena, and no trimming, the
# memory is reused: 0.003 s of system time per resnet_26 step.
RETAIN_MALLOC_ENV: dict[str, str] = {
    "MALLOC_MMAP_MAX_": "0",
    "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
    "MALLOC_ARENA_MAX": "1",
}
Allocator = Literal["system", "retain"]
ALLOCATOR_ENV: dict[str, dict[str, str]] = {"system": {}, "retain": RETAIN_MALLOC_ENV}


@contextlib.contextmanager
def _environment(changes: Mapping[str, str]) -> Iterator[None]:
    """Sets environment variables (so that children started inside inherit them);
    restores the previous values on exit."""
    import os

    before = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _stack_limit(size: int) -> Iterator[None]:
    """Raises this process's soft stack limit to ``size`` (capped by the hard limit), so
    that children started inside start with it; restores it on exit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    want = size if hard == resource.RLIM_INFINITY else min(size, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_STACK, (soft, hard))


def in_pinned_process(
    fn: Callable[..., Any],
    *args: Any,
    cpu: int,
    allocator: Allocator = "system",
    timeout: float | None = None,
    **kwargs: Any,
) -> Any:
    """Runs ``fn(*args, **kwargs)`` in a fresh process pinned to core ``cpu``.

    The child starts without JAX initialized (``spawn``), pins itself, and only then
    creates XLA's CPU client, whose thread pools therefore have that one core. Its
    threads get :data:`CHILD_STACK_BYTES` of stack. A script
    calling this must guard its top level with ``if __name__ == "__main__":`` (the
    child imports the main module).

    Args:
      fn: a module-level function (it is pickled by name); its result must pickle.
      args: its positional arguments.
      cpu: the core.
      allocator: ``"system"`` (glibc's defaults) or ``"retain"`` (the child's malloc
        keeps freed memory for reuse, :data:`RETAIN_MALLOC_ENV`).
      timeout: seconds the child may take in all; it is killed after that (None: no
        limit here; ``fn`` may still limit itself with :func:`arm_deadline`).
      kwargs: its keyword arguments.

    Returns:
      What ``fn`` returned.

    Raises:
      MeasureTimeoutError: the child ran past ``timeout`` or its own deadline.
      BrokenProcessPool: the child died without a reply (e.g. XLA aborted).
      Exception: what ``fn`` raised.
    """
    import multiprocessing
    import signal
    from concurrent.futures.process import BrokenProcessPool

    if allocator not in ALLOCATOR_ENV:
        raise ValueError(f"allocator must be one of {list(ALLOCATOR_ENV)}, got {allocator!r}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child_main, args=(send, cpu, fn, args, kwargs))
    # the stack limit is raised just for the start (and one thread at a time, so that
    # concurrent callers restore the original limit)
    with _SPAWN_LOCK, _stack_limit(CHILD_STACK_BYTES), _environment(ALLOCATOR_ENV[allocator]):
        process.start()
    send.close()
    replied = False
    try:
        if not receive.poll(timeout):
            raise MeasureTimeoutError(f"timed out after {timeout:g} s")
        try:
            ok, payload = receive.recv()
            replied = True
        except EOFError:
            process.join()
            if process.exitcode == -signal.SIGXCPU:
                raise MeasureTimeoutError(
                    "timed out: ran past its CPU-time limit, in proportion to XLA's default "
                    "compile and run time (deadline_after)"
                ) from None
            raise BrokenProcessPool(
                f"the measuring process died (exit code {process.exitcode})"
            ) from None
    finally:
        receive.close()
        process.join(10.0 if replied else 0.0)  # a child that replied exits by itself
        if process.is_alive():
            process.kill()
            process.join()
    if not ok:
        raise payload
    return payload


@dataclass(frozen=True)
class Timing:
    """Timed samples of one configuration, in seconds."""

    name: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median of the samples."""
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        """Fastest sample."""
        return min(self.samples)

    @property
    def max(self) -> float:
        """Slowest sample."""
        return max(self.samples)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able summary: median, min, max and the raw samples."""
        return {
            "name": self.name,
            "median_s": self.median,
            "min_s": self.min,
            "max_s": self.max,
            "repeats": len(self.samples),
            "samples_s": list(self.samples),
        }


# Objects the garbage collector holds frozen when this module is imported: none on Python
# 3.11, a few hundred of the interpreter's own from its start on 3.12. More than these
# means the process froze objects itself, and :func:`young_collections` leaves them so.
_FROZEN_AT_IMPORT = gc.get_freeze_count()


@contextlib.contextmanager
def young_collections() -> Iterator[None]:
    """Within the block, a collection looks only at objects made inside it.

    One full collection runs on entry, then every object alive is frozen
    (``gc.freeze``) until the block ends: the collection :func:`time_call` runs before
    each call then costs in proportion to the garbage the timed calls made, not to the
    process's heap (large in a process with JAX and Flax loaded, and often longer to
    collect than the call timed). Where the process froze objects itself (more are
    frozen than when this module was imported), it leaves them so and does nothing.
    """
    if gc.get_freeze_count() > _FROZEN_AT_IMPORT:
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def time_call(fn: Callable[[], Any], *, clock: Clock = "wall") -> float:
    """Times one call of ``fn`` with the garbage collector off.

    A collection runs first, outside the timed region, so garbage left by earlier
    calls is not charged to this one (inside :func:`young_collections`, as in
    :func:`time_interleaved`, it looks only at objects made since the block began).
    The result of ``fn`` is dropped only after the clock stops.

    Args:
      fn: the work.
      clock: ``"wall"`` or ``"cpu"`` (see the module docstring).

    Returns:
      Seconds on that clock.
    """
    now = CLOCKS[clock]
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = now()
        result = fn()
        elapsed = now() - start
    finally:
        if was_enabled:
            gc.enable()
    del result
    return elapsed


Order = Literal["rotated", "balanced"]
ORDERS: tuple[str, ...] = get_args(Order)
"""The round orders :func:`time_interleaved` knows (see :func:`round_order`)."""


def round_order(count: int, round_index: int, order: Order = "rotated") -> list[int]:
    """The order in which :func:`time_interleaved` times ``count`` configurations in a round.

    ``"rotated"``: ``0 1 2``, ``1 2 0``, ``2 0 1``, ...: every configuration takes every
    position, but always right after the same one. ``"balanced"``: the rows of a Williams
    design (``0 1 n-1 2 n-2 ...``, shifted by one each round; for an odd count, followed by
    the same rows reversed): over ``count`` rounds (``2 count`` for an odd count) every
    configuration takes every position and follows every other one equally often, so
    what a run leaves behind for the next one (a slow neighbour's freed temporaries, say)
    is shared by all alike.

    Args:
      count: how many configurations.
      round_index: the round, from 0.
      order: ``"rotated"`` or ``"balanced"``.

    Returns:
      The configurations' indices in the order they run.

    Raises:
      ValueError: an unknown order.
    """
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; known: {', '.join(ORDERS)}")
    if order == "rotated":
        shift = round_index % count
        return [*range(shift, count), *range(shift)]
    first = [0]
    low, high = 1, count - 1
    while low <= high:
        first.append(low)
        if low != high:
            first.append(high)
        low, high = low + 1, high - 1
    rows = count if count % 2 == 0 else 2 * count
    r = round_index % rows
    row = [(i + r) % count for i in first]
    return row[::-1] if r >= count else row


def time_interleaved(
    fns: Mapping[str, Callable[[], Any]],
    *,
    repeats: int,
    warmup: int = 1,
    progress: Callable[[str], None] | None = None,
    clock: Clock = "wall",
    order: Order = "rotated",
) -> dict[str, Timing]:
    """Times several configurations interleaved, each round in a new order
    (:func:`round_order`).

    Rotating keeps a configuration from always taking the same position: in a fixed
    order, two identical executables measure apart, the later one slower. A rotated
    order still times each configuration right after the same one; ``"balanced"`` varies
    that too.

    Args:
      fns: configuration name -> zero-argument callable doing the work once.
      repeats: timed calls per configuration.
      warmup: untimed rounds run first (each configuration once per round).
      progress: called with a short line after each round, if given.
      clock: ``"wall"`` or ``"cpu"`` (see the module docstring).
      order: ``"rotated"`` or ``"balanced"`` (:func:`round_order`).

    Returns:
      Configuration name -> its :class:`Timing`, in the order of ``fns``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    samples: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    round_order(len(names), 0, order)  # an unknown order fails before any work
    with young_collections():
        for _ in range(warmup):
            for fn in fns.values():
                time_call(fn, clock=clock)
        for round_index in range(repeats):
            for index in round_order(len(names), round_index, order):
                name = names[index]
                samples[name].append(time_call(fns[name], clock=clock))
            if progress is not None:
                done = ", ".join(f"{name} {s[-1]:.3f}s" for name, s in samples.items())
                progress(f"round {round_index + 1}/{repeats}: {done}")
    return {name: Timing(name, tuple(s)) for name, s in samples.items()}


def ratio(numerator: Timing, denominator: Timing) -> float:
    """Ratio of medians, ``numerator / denominator`` (> 1: numerator is slower)."""
    return numerator.median / denominator.median
