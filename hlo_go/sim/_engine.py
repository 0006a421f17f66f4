"""The simulator's compiled kernels: kernels from groups, the event loop, buffer liveness.

Plain numpy-array code in the subset numba compiles (:func:`hlo_go.decisions._jit.jit`);
without numba it runs as Python, with identical results. :mod:`hlo_go.sim.simulate`
documents the semantics; comments here say how they are computed.
"""

from __future__ import annotations

import numpy as np

from hlo_go.decisions._jit import jit

_INF = np.inf


@jit
def _csr(keys: np.ndarray, values: np.ndarray, count: int, nkeys: int) -> tuple:
    """Counting sort of ``values[:count]`` by ``keys[:count]``: (ptr[nkeys+1], sorted values)."""
    ptr = np.zeros(nkeys + 1, np.int64)
    for i in range(count):
        ptr[keys[i] + 1] += 1
    for k in range(nkeys):
        ptr[k + 1] += ptr[k]
    fill = ptr[:-1].copy()
    out = np.empty(count, np.int64)
    for i in range(count):
        k = keys[i]
        out[fill[k]] = values[i]
        fill[k] += 1
    return ptr, out


@jit
def build_kernels(
    group: np.ndarray,
    topo_order: np.ndarray,
    placement: np.ndarray,
    priority: np.ndarray,
    kind: np.ndarray,
    spec: np.ndarray,
    compute_s: np.ndarray,
    memory_eff: np.ndarray,
    fused_compute_s: np.ndarray,
    fused_memory_eff: np.ndarray,
    bytes_read: np.ndarray,
    bytes_written: np.ndarray,
    bytes_out: np.ndarray,
    data_succ_ptr: np.ndarray,
    data_succ: np.ndarray,
    data_pred_ptr: np.ndarray,
    data_pred: np.ndarray,
    data_pred_bytes: np.ndarray,
    control_pred_ptr: np.ndarray,
    control_pred: np.ndarray,
    root: int,
    launch_s: np.ndarray,
    launches: np.ndarray,
    regenerated: np.ndarray,
    window_reads: np.ndarray,
    max_chain: int,
    bandwidth: np.ndarray,
    link_bw: np.ndarray,
    link_latency: np.ndarray,
    link_channel: np.ndarray,
) -> tuple:
    """Kernels, their durations and dependencies, and the transfers between devices.

    Returns:
      A tuple: ``kid`` (kernel of each node), ``mptr``/``members`` (members of each kernel
      in topological order), per kernel ``kdev``, ``kprio``, ``kdur``, ``kfree``, ``kbytes``;
      ``materialized`` (nodes whose output is written to memory); kernel→kernel
      dependencies as CSR ``ksucc_ptr``/``ksucc`` and ``indeg``; transfers ``t_node``,
      ``t_dst``, ``t_src``, ``t_chan``, ``t_dur``, ``t_bytes`` with ``thead``/``tnext`` (the
      transfers of each node as a linked list), their consumers ``tsucc_ptr``/``tsucc``
      and the transfers each kernel triggers ``ktr_ptr``/``ktr``.
    """
    n = group.shape[0]
    # Kernels are numbered in the topological position of their last member: the order
    # XLA's lowering puts a fusion at, and the FIFO tie-break of the ready queues.
    size = np.zeros(n, np.int64)
    for v in range(n):
        size[group[v]] += 1
    seen = np.zeros(n, np.int64)
    kid_of = np.full(n, -1, np.int64)
    nk = 0
    for i in range(n):
        g = group[topo_order[i]]
        seen[g] += 1
        if seen[g] == size[g]:
            kid_of[g] = nk
            nk += 1
    kid = np.empty(n, np.int64)
    for v in range(n):
        kid[v] = kid_of[group[v]]
    order_kid = np.empty(n, np.int64)
    order_node = np.empty(n, np.int64)
    for i in range(n):
        v = topo_order[i]
        order_kid[i] = kid[v]
        order_node[i] = v
    mptr, members = _csr(order_kid, order_node, n, nk)

    # Values a fused reader recomputes (hlo_go.xla.fusion.regenerate_shared): of a
    # regenerated opcode, in a fused kernel, computed from the kernel's inputs through
    # such members only, at most max_chain of them (counted along every path, so a
    # shared member counts once per path).
    recomputed = np.zeros(n, np.bool_)
    chain = np.zeros(n, np.int64)
    for i in range(n):
        v = topo_order[i]
        if not regenerated[v] or size[group[v]] < 2:
            continue
        length = 1
        for j in range(data_pred_ptr[v], data_pred_ptr[v + 1]):
            p = data_pred[j]
            if kid[p] == kid[v]:
                if chain[p] == 0:
                    length = max_chain + 1
                    break
                length += chain[p]
        if length <= max_chain:
            chain[v] = length
            recomputed[v] = v != root

    # How many times a fused kernel computes each member (XLA's loop emitter computes a
    # fused value at every read): once, or for a value a reduce-window of the kernel
    # reads, once per read of each element (window_reads), compounded along chains of
    # windows; a value read at one index by several members is computed once there.
    computed = np.ones(n, np.float64)
    for k in range(nk):
        if mptr[k + 1] - mptr[k] < 2:
            continue
        for i in range(mptr[k + 1] - 1, mptr[k] - 1, -1):
            v = members[i]
            times = 1.0
            for j in range(data_succ_ptr[v], data_succ_ptr[v + 1]):
                w = data_succ[j]
                if kid[w] == k and computed[w] * window_reads[w] > times:
                    times = computed[w] * window_reads[w]
            computed[v] = times

    kdev = np.empty(nk, np.int64)
    kprio = np.empty(nk, np.float64)
    kdur = np.empty(nk, np.float64)
    kfree = np.zeros(nk, np.bool_)
    kbytes = np.empty(nk, np.float64)
    materialized = np.zeros(n, np.bool_)
    for k in range(nk):
        first = members[mptr[k]]
        d = placement[first]
        u = spec[d]
        prio = -_INF
        comp = 0.0
        meff = _INF
        read = 0.0
        written = 0.0
        nlaunch = 1.0
        single = mptr[k + 1] - mptr[k] == 1
        for i in range(mptr[k], mptr[k + 1]):
            v = members[i]
            if priority[v] > prio:
                prio = priority[v]
            if launches[v] > nlaunch:
                nlaunch = launches[v]
            if single:
                comp += compute_s[u, v]
                eff = memory_eff[u, v]
            else:
                comp += fused_compute_s[u, v] * computed[v]
                eff = fused_memory_eff[u, v]
            if eff < meff:
                meff = eff
            read += bytes_read[v]
            for j in range(data_pred_ptr[v], data_pred_ptr[v + 1]):
                p = data_pred[j]
                if kid[p] == k:
                    read -= min(float(data_pred_bytes[j]), bytes_read[v])
                elif recomputed[p] and not single:  # reads what p is computed from
                    read -= max(0.0, min(float(data_pred_bytes[j]), bytes_read[v]) - bytes_read[p])
            internal = v != root and data_succ_ptr[v + 1] > data_succ_ptr[v]
            if internal:
                for j in range(data_succ_ptr[v], data_succ_ptr[v + 1]):
                    w = data_succ[j]
                    if kid[w] != k and not (recomputed[v] and size[group[w]] > 1):
                        internal = False
                        break
            if not internal:
                written += bytes_written[v]
                materialized[v] = True
        if read < 0.0:
            read = 0.0
        kdev[k] = d
        kprio[k] = prio
        kbytes[k] = read + written
        if single and kind[first] != 0:
            kfree[k] = True
            kdur[k] = 0.0
            materialized[first] = kind[first] == 2
        else:
            memory = (read + written) / (bandwidth[d] * meff)
            kdur[k] = launch_s[d] * nlaunch + max(comp, memory)

    # Dependencies: kernel -> kernel on one device (and every control edge), transfer ->
    # kernel across devices; one transfer per (producer node, destination device).
    max_edges = data_pred.shape[0] + control_pred.shape[0]
    dep_src = np.empty(max_edges, np.int64)
    dep_dst = np.empty(max_edges, np.int64)
    nd = 0
    e = data_pred.shape[0]
    t_node = np.empty(e, np.int64)
    t_dst = np.empty(e, np.int64)
    tnext = np.empty(e, np.int64)
    thead = np.full(n, -1, np.int64)
    tk_src = np.empty(e, np.int64)
    tk_dst = np.empty(e, np.int64)
    nt = 0
    ntk = 0
    indeg = np.zeros(nk, np.int64)
    kmark = np.full(nk, -1, np.int64)
    tmark = np.full(e, -1, np.int64)
    for k in range(nk):
        d = kdev[k]
        for i in range(mptr[k], mptr[k + 1]):
            v = members[i]
            for j in range(data_pred_ptr[v], data_pred_ptr[v + 1]):
                p = data_pred[j]
                kp = kid[p]
                if kp == k:
                    continue
                if kdev[kp] == d:
                    if kmark[kp] != k:
                        kmark[kp] = k
                        dep_src[nd] = kp
                        dep_dst[nd] = k
                        nd += 1
                        indeg[k] += 1
                else:
                    tr = thead[p]
                    while tr >= 0 and t_dst[tr] != d:
                        tr = tnext[tr]
                    if tr < 0:
                        tr = nt
                        t_node[nt] = p
                        t_dst[nt] = d
                        tnext[nt] = thead[p]
                        thead[p] = nt
                        nt += 1
                    if tmark[tr] != k:
                        tmark[tr] = k
                        tk_src[ntk] = tr
                        tk_dst[ntk] = k
                        ntk += 1
                        indeg[k] += 1
            for j in range(control_pred_ptr[v], control_pred_ptr[v + 1]):
                kp = kid[control_pred[j]]
                if kp != k and kmark[kp] != k:
                    kmark[kp] = k
                    dep_src[nd] = kp
                    dep_dst[nd] = k
                    nd += 1
                    indeg[k] += 1
    ksucc_ptr, ksucc = _csr(dep_src, dep_dst, nd, nk)
    tsucc_ptr, tsucc = _csr(tk_src, tk_dst, ntk, nt)
    t_src = np.empty(nt, np.int64)
    t_chan = np.empty(nt, np.int64)
    t_dur = np.empty(nt, np.float64)
    t_bytes = np.empty(nt, np.int64)
    trig = np.empty(nt, np.int64)
    tids = np.arange(nt)
    for tr in range(nt):
        kp = kid[t_node[tr]]
        s = kdev[kp]
        t_src[tr] = s
        b = bytes_out[t_node[tr]]
        t_bytes[tr] = b
        t_chan[tr] = link_channel[s, t_dst[tr]]
        t_dur[tr] = link_latency[s, t_dst[tr]] + b / link_bw[s, t_dst[tr]]
        trig[tr] = kp
    ktr_ptr, ktr = _csr(trig, tids, nt, nk)
    return (
        kid,
        mptr,
        members,
        kdev,
        kprio,
        kdur,
        kfree,
        kbytes,
        materialized,
        ksucc_ptr,
        ksucc,
        indeg,
        t_node[:nt].copy(),
        t_dst[:nt].copy(),
        t_src,
        t_chan,
        t_dur,
        t_bytes,
        thead,
        tnext[:nt].copy(),
        tsucc_ptr,
        tsucc,
        ktr_ptr,
        ktr,
    )


@jit
def _event_push(
    times: np.ndarray, seqs: np.ndarray, ids: np.ndarray, size: int, t: float, seq: int, item: int
) -> int:
    """Pushes ``item`` at time ``t`` onto the (time, seq) min-heap; returns the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if times[parent] < t or (times[parent] == t and seqs[parent] < seq):
            break
        times[i] = times[parent]
        seqs[i] = seqs[parent]
        ids[i] = ids[parent]
        i = parent
    times[i] = t
    seqs[i] = seq
    ids[i] = item
    return size + 1


@jit
def _event_pop(times: np.ndarray, seqs: np.ndarray, ids: np.ndarray, size: int) -> int:
    """Removes the heap's top (read it before calling); returns the new size."""
    size -= 1
    t = times[size]
    seq = seqs[size]
    item = ids[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        right = child + 1
        if right < size and (
            times[right] < times[child]
            or (times[right] == times[child] and seqs[right] < seqs[child])
        ):
            child = right
        if t < times[child] or (t == times[child] and seq < seqs[child]):
            break
        times[i] = times[child]
        seqs[i] = seqs[child]
        ids[i] = ids[child]
        i = child
    times[i] = t
    seqs[i] = seq
    ids[i] = item
    return size


@jit
def _before(a: int, b: int, prio: np.ndarray) -> bool:
    """Ready-queue order: higher priority first, then the smaller kernel id (FIFO)."""
    return prio[a] > prio[b] or (prio[a] == prio[b] and a < b)


@jit
def _ready_push(heap: np.ndarray, base: int, size: int, k: int, prio: np.ndarray) -> int:
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(k, heap[base + parent], prio):
            break
        heap[base + i] = heap[base + parent]
        i = parent
    heap[base + i] = k
    return size + 1


@jit
def _ready_pop(heap: np.ndarray, base: int, size: int, prio: np.ndarray) -> int:
    size -= 1
    k = heap[base + size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        right = child + 1
        if right < size and _before(heap[base + right], heap[base + child], prio):
            child = right
        if _before(k, heap[base + child], prio):
            break
        heap[base + i] = heap[base + child]
        i = child
    heap[base + i] = k
    return size


@jit
def run_events(
    num_devices: int,
    num_channels: int,
    kdev: np.ndarray,
    kprio: np.ndarray,
    kdur: np.ndarray,
    kfree: np.ndarray,
    indeg: np.ndarray,
    ksucc_ptr: np.ndarray,
    ksucc: np.ndarray,
    ktr_ptr: np.ndarray,
    ktr: np.ndarray,
    t_chan: np.ndarray,
    t_dur: np.ndarray,
    tsucc_ptr: np.ndarray,
    tsucc: np.ndarray,
) -> tuple:
    """The discrete-event simulation.

    Devices run one kernel at a time, picking the ready kernel with the highest priority
    (ties: smallest kernel id) whenever they are free; free kernels (views, holders)
    finish the moment they are ready. A transfer is requested when its producer's kernel
    finishes and runs when its channel is free (FIFO per channel), for its latency plus
    bytes / bandwidth. All events at one time are applied before devices pick kernels.

    Returns:
      ``(kstart, kend, kstep_start, kstep_end, tstart, tend, tstep_start, tstep_end,
      step_times, num_steps, finished)``; a "step" numbers the distinct event times in
      order (step 0 is time 0), ``step_times[s]`` is the time of step ``s``.
    """
    nk = kdev.shape[0]
    nt = t_chan.shape[0]
    kstart = np.zeros(nk, np.float64)
    kend = np.zeros(nk, np.float64)
    kss = np.zeros(nk, np.int64)
    kse = np.zeros(nk, np.int64)
    tstart = np.zeros(nt, np.float64)
    tend = np.zeros(nt, np.float64)
    tss = np.zeros(nt, np.int64)
    tse = np.zeros(nt, np.int64)
    step_times = np.zeros(nk + nt + 2, np.float64)

    # Ready queues: one heap per device in one array, sized by the device's kernel count.
    base = np.zeros(num_devices + 1, np.int64)
    for k in range(nk):
        base[kdev[k] + 1] += 1
    for d in range(num_devices):
        base[d + 1] += base[d]
    heap = np.empty(max(nk, 1), np.int64)
    hsize = np.zeros(num_devices, np.int64)
    busy = np.zeros(num_devices, np.bool_)
    # Channels: FIFO of waiting transfers as linked lists.
    chead = np.full(num_channels, -1, np.int64)
    ctail = np.full(num_channels, -1, np.int64)
    cbusy = np.zeros(num_channels, np.bool_)
    tnext = np.full(nt, -1, np.int64)
    # Event heap: kernel ends (id k) and transfer ends (id nk + tr).
    cap = nk + nt + 1
    ev_t = np.empty(cap, np.float64)
    ev_s = np.empty(cap, np.int64)
    ev_i = np.empty(cap, np.int64)
    ne = 0
    seq = 0
    # Kernels finished at the current time whose successors are not yet released, in the
    # order they finished (a queue; every kernel enters it once).
    fin = np.empty(max(nk, 1), np.int64)
    fhead = 0
    nf = 0
    remaining = indeg.copy()
    finished = 0
    now = 0.0
    step = 0
    for k in range(nk):
        if remaining[k] == 0:
            if kfree[k]:
                fin[nf] = k
                nf += 1
            else:
                d = kdev[k]
                hsize[d] = _ready_push(heap, base[d], hsize[d], k, kprio)
    while True:
        while fhead < nf:
            k = fin[fhead]
            fhead += 1
            finished += 1
            for j in range(ksucc_ptr[k], ksucc_ptr[k + 1]):
                s = ksucc[j]
                remaining[s] -= 1
                if remaining[s] == 0:
                    if kfree[s]:
                        kstart[s] = now
                        kend[s] = now
                        kss[s] = step
                        kse[s] = step
                        fin[nf] = s
                        nf += 1
                    else:
                        d = kdev[s]
                        hsize[d] = _ready_push(heap, base[d], hsize[d], s, kprio)
            for j in range(ktr_ptr[k], ktr_ptr[k + 1]):
                tr = ktr[j]
                c = t_chan[tr]
                if cbusy[c]:
                    if ctail[c] < 0:
                        chead[c] = tr
                    else:
                        tnext[ctail[c]] = tr
                    ctail[c] = tr
                else:
                    cbusy[c] = True
                    tstart[tr] = now
                    tss[tr] = step
                    ne = _event_push(ev_t, ev_s, ev_i, ne, now + t_dur[tr], seq, nk + tr)
                    seq += 1
        for d in range(num_devices):
            if not busy[d] and hsize[d] > 0:
                k = heap[base[d]]
                hsize[d] = _ready_pop(heap, base[d], hsize[d], kprio)
                busy[d] = True
                kstart[k] = now
                kss[k] = step
                ne = _event_push(ev_t, ev_s, ev_i, ne, now + kdur[k], seq, k)
                seq += 1
        if ne == 0:
            break
        now = ev_t[0]
        step += 1
        step_times[step] = now
        while ne > 0 and ev_t[0] == now:
            item = ev_i[0]
            ne = _event_pop(ev_t, ev_s, ev_i, ne)
            if item < nk:
                kend[item] = now
                kse[item] = step
                busy[kdev[item]] = False
                fin[nf] = item
                nf += 1
            else:
                tr = item - nk
                tend[tr] = now
                tse[tr] = step
                c = t_chan[tr]
                nxt = chead[c]
                if nxt >= 0:
                    chead[c] = tnext[nxt]
                    if chead[c] < 0:
                        ctail[c] = -1
                    tstart[nxt] = now
                    tss[nxt] = step
                    ne = _event_push(ev_t, ev_s, ev_i, ne, now + t_dur[nxt], seq, nk + nxt)
                    seq += 1
                else:
                    cbusy[c] = False
                for j in range(tsucc_ptr[tr], tsucc_ptr[tr + 1]):
                    s = tsucc[j]
                    remaining[s] -= 1
                    if remaining[s] == 0:
                        if kfree[s]:
                            kstart[s] = now
                            kend[s] = now
                            kss[s] = step
                            kse[s] = step
                            fin[nf] = s
                            nf += 1
                        else:
                            d = kdev[s]
                            hsize[d] = _ready_push(heap, base[d], hsize[d], s, kprio)
    return kstart, kend, kss, kse, tstart, tend, tss, tse, step_times, step, finished


@jit
def liveness(
    topo_order: np.ndarray,
    kid: np.ndarray,
    kind: np.ndarray,
    kdev: np.ndarray,
    kfree: np.ndarray,
    materialized: np.ndarray,
    bytes_out: np.ndarray,
    data_succ_ptr: np.ndarray,
    data_succ: np.ndarray,
    root: int,
    kss: np.ndarray,
    kse: np.ndarray,
    t_node: np.ndarray,
    t_dst: np.ndarray,
    thead: np.ndarray,
    tnext: np.ndarray,
    tss: np.ndarray,
    tse: np.ndarray,
    end_step: int,
    num_devices: int,
) -> tuple:
    """Buffers with their lifetimes (in steps), and each device's peak memory.

    A materialized node's buffer lives on its device from its kernel's start step
    (step 0 for holders) to the last end step of its consumers on that device, of
    the transfers out of it, and of the consumers of views of it (a view's consumers
    keep the viewed buffer alive); holders and the root live to ``end_step``. A
    transferred copy lives on the destination from the transfer's start to its last
    consumer's end there (at least the transfer's end).

    Returns:
      ``(buf_node, buf_dev, buf_bytes, buf_alloc, buf_free, buf_copy, peak)``: per buffer
      the node whose value it holds, its device, size, alloc and free steps, whether it
      is a transferred copy; ``peak`` ``int64[num_devices]``. At one step frees come
      before allocations.
    """
    n = kid.shape[0]
    nt = t_node.shape[0]
    last = np.empty(n, np.int64)
    tlast = tse.copy()
    for i in range(n - 1, -1, -1):
        v = topo_order[i]
        k = kid[v]
        use = kse[k]
        dv = kdev[k]
        for j in range(data_succ_ptr[v], data_succ_ptr[v + 1]):
            c = data_succ[j]
            kc = kid[c]
            if kc == k:
                continue
            through = last[c] if (kfree[kc] and kind[c] == 1) else kse[kc]
            if kdev[kc] == dv:
                if through > use:
                    use = through
            else:
                tr = thead[v]
                while t_dst[tr] != kdev[kc]:
                    tr = tnext[tr]
                if through > tlast[tr]:
                    tlast[tr] = through
                if tse[tr] > use:
                    use = tse[tr]
        if v == root or (kfree[k] and kind[v] == 2):
            use = end_step  # the step's output and pre-existing buffers outlive the step
        last[v] = use
    count = 0
    for v in range(n):
        if materialized[v]:
            count += 1
    nb = count + nt
    buf_node = np.empty(nb, np.int64)
    buf_dev = np.empty(nb, np.int64)
    buf_bytes = np.empty(nb, np.int64)
    buf_alloc = np.empty(nb, np.int64)
    buf_free = np.empty(nb, np.int64)
    buf_copy = np.zeros(nb, np.bool_)
    b = 0
    for v in range(n):
        if materialized[v]:
            k = kid[v]
            buf_node[b] = v
            buf_dev[b] = kdev[k]
            buf_bytes[b] = bytes_out[v]
            buf_alloc[b] = 0 if (kfree[k] and kind[v] == 2) else kss[k]
            buf_free[b] = last[v]
            b += 1
    for tr in range(nt):
        buf_node[b] = t_node[tr]
        buf_dev[b] = t_dst[tr]
        buf_bytes[b] = bytes_out[t_node[tr]]
        buf_alloc[b] = tss[tr]
        buf_free[b] = tlast[tr]
        buf_copy[b] = True
        b += 1
    # Sweep the steps: frees, then allocations, per step.
    live = np.zeros(nb, np.bool_)
    for i in range(nb):
        live[i] = buf_free[i] > buf_alloc[i] and buf_bytes[i] > 0
    aptr, aorder = _csr_masked(buf_alloc, live, end_step + 1)
    fptr, forder = _csr_masked(buf_free, live, end_step + 1)
    current = np.zeros(num_devices, np.int64)
    peak = np.zeros(num_devices, np.int64)
    for s in range(end_step + 1):
        for j in range(fptr[s], fptr[s + 1]):
            i = forder[j]
            current[buf_dev[i]] -= buf_bytes[i]
        for j in range(aptr[s], aptr[s + 1]):
            i = aorder[j]
            d = buf_dev[i]
            current[d] += buf_bytes[i]
            if current[d] > peak[d]:
                peak[d] = current[d]
    return buf_node, buf_dev, buf_bytes, buf_alloc, buf_free, buf_copy, peak


@jit
def _csr_masked(keys: np.ndarray, mask: np.ndarray, nkeys: int) -> tuple:
    """Counting sort of the indices ``i`` with ``mask[i]`` by ``keys[i]``."""
    ptr = np.zeros(nkeys + 1, np.int64)
    count = 0
    for i in range(keys.shape[0]):
        if mask[i]:
            ptr[keys[i] + 1] += 1
            count += 1
    for k in range(nkeys):
        ptr[k + 1] += ptr[k]
    fill = ptr[:-1].copy()
    out = np.empty(count, np.int64)
    for i in range(keys.shape[0]):
        if mask[i]:
            out[fill[keys[i]]] = i
            fill[keys[i]] += 1
    return ptr, out
