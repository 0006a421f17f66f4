"""The ``lowering`` benchmark with a malloc that keeps freed memory for the next call.

XLA:CPU allocates each call's temporary buffer afresh, and glibc's malloc hands such
large blocks back to the kernel when they are freed, so every call page-faults its
temporaries in again: on this host about 0.5 ms per MB, 10-20 % of a corpus training
step. A fusion that needs more temporaries than XLA's own then loses by that much even
where its kernels are as fast. This run measures the same graphs and variants with
:data:`hlo_go.xla.timing.RETAIN_MALLOC_ENV` set in the measuring processes (XLA's
default is measured the same way), which separates kernel time from that cost.

``HLO_GO_LOWERING_GRAPHS=a,b`` picks graphs (as for ``lowering``); results are cached in
``results/lowering_retain.partial.json``; ``python -m benchmarks.bench_lowering
--from-partial --allocator retain`` writes ``results/lowering_retain.json`` from them.
"""

from __future__ import annotations

from typing import Any

from benchmarks import bench_lowering


def run(*, quick: bool = False) -> dict[str, Any]:
    """Runs :func:`benchmarks.bench_lowering.run` with the retaining allocator."""
    return bench_lowering.run(quick=quick, allocator="retain")
