"""Searched / randomly wired networks.

nasnet_a  NASNet-A Mobile (4 @ 1056), Zoph et al. 2018, 224x224.
randwire  RandWire WS(4, 0.75), small regime, C=78, Xie et al. 2019, 224x224.
"""

import math

import numpy as np

from netbuilder import Net, same_pads

# ===================================================================
# NASNet-A
# ===================================================================
# A cell starts from two hidden states: h_i (index 0, the previous cell's
# output after ReLU-1x1-BN) and h_{i-1} (index 1, the output of the cell
# before, resized to match).  Each of the 5 blocks applies two operations to
# two states and adds the results; the new state gets the next index.
# Operations: sepK = (ReLU, depthwise KxK, pointwise 1x1, BN) x 2,
# avg3/max3 = 3x3 pooling, none = identity.

NORMAL_OPS = ["sep5", "sep3", "sep5", "sep3", "avg3", "none", "avg3", "avg3", "sep3", "none"]
NORMAL_IDX = [0, 1, 1, 1, 0, 1, 1, 1, 0, 0]
NORMAL_USED = [1, 0, 0, 0, 0, 0, 0]       # h_i is consumed, h_{i-1} is concatenated

REDUCE_OPS = ["sep5", "sep7", "max3", "sep7", "avg3", "sep5", "none", "avg3", "sep3", "max3"]
REDUCE_IDX = [0, 1, 0, 1, 0, 1, 3, 2, 2, 0]
REDUCE_USED = [1, 1, 1, 0, 0, 0, 0]


def _same(x, k, s):
    """TensorFlow SAME padding as an ONNX 4-tuple (may be asymmetric)."""
    t, b = same_pads(x.h, k, s)
    l, r = same_pads(x.w, k, s)
    return (t, l, b, r)


def _sep_stack(net, x, filters, k, stride):
    y = x
    for i in (1, 2):
        s = stride if i == 1 else 1
        with net.scope("sep%d" % i):
            y = net.relu(y, name="relu")
            y = net.conv(y, y.c, k, s, _same(y, k, s), group=y.c, name="depthwise")
            y = net.conv(y, filters, 1, name="pointwise", gain=1.0)
            y = net.bn(y, name="bn")
    return y


def _factorized_reduction(net, x, filters, stride):
    """1x1 conv for stride 1; for stride 2 two half-width 1x1 paths on the
    even and the odd (shifted) pixel grids, concatenated, then BN."""
    if stride == 1:
        y = net.conv(x, filters, 1, name="path_conv")
        return net.bn(y, name="path_bn")
    f1 = filters // 2
    f2 = filters - f1
    with net.scope("path1"):
        p1 = net.avgpool(x, 1, 2, name="avgpool")
        p1 = net.conv(p1, f1, 1, name="conv")
    with net.scope("path2"):
        # TF: pad bottom/right by one, drop the first row/column, then
        # subsample by 2 (== pick the odd pixels).  Expressed with allowed
        # ops as Pad(end=1) followed by a stride-2 2x2 conv whose weights are
        # zero except for the bottom-right tap.
        p2 = net.pad(x, [0, 0, 0, 0, 0, 0, 1, 1], name="pad")
        w = np.zeros((f2, x.c, 2, 2), np.float32)
        w[:, :, 1, 1] = net.normal((f2, x.c), np.sqrt(2.0 / x.c))
        p2 = net.conv(p2, f2, 2, 2, 0, name="conv_shifted", weight=w)
    y = net.concat([p1, p2], name="concat")
    return net.bn(y, name="bn")


def _reduce_prev(net, prev, cur, filters):
    if prev is None:
        return cur
    with net.scope("prev"):
        if prev.h != cur.h:
            prev = net.relu(prev, name="relu")
            return _factorized_reduction(net, prev, filters, 2)
        if prev.c != filters:
            prev = net.relu(prev, name="relu")
            prev = net.conv(prev, filters, 1, name="conv_1x1")
            return net.bn(prev, name="bn")
    return prev


def _apply_op(net, x, op, filters, stride):
    if op.startswith("sep"):
        return _sep_stack(net, x, filters, int(op[3:]), stride)
    if op in ("avg3", "max3"):
        if op == "avg3":
            y = net.avgpool(x, 3, stride, _same(x, 3, stride),
                            count_include_pad=False, name="avgpool")
        else:
            y = net.maxpool(x, 3, stride, _same(x, 3, stride), name="maxpool")
        if y.c != filters:
            y = net.conv(y, filters, 1, name="conv_1x1", gain=1.0)
            y = net.bn(y, name="bn")
        return y
    assert op == "none"
    if stride > 1 or x.c != filters:
        y = net.relu(x, name="relu")
        y = net.conv(y, filters, 1, stride, name="conv_1x1")
        return net.bn(y, name="bn")
    return x


def _cell(net, cur, prev, filters, reduction):
    ops, idx, used = ((REDUCE_OPS, REDUCE_IDX, REDUCE_USED) if reduction
                      else (NORMAL_OPS, NORMAL_IDX, NORMAL_USED))
    stride = 2 if reduction else 1
    prev = _reduce_prev(net, prev, cur, filters)
    with net.scope("beginning"):
        h = net.relu(cur, name="relu")
        h = net.conv(h, filters, 1, name="conv_1x1")
        h = net.bn(h, name="bn")
    states = [h, prev]
    for b in range(5):
        with net.scope("comb_iter_%d" % b):
            outs = []
            for side, name in ((0, "left"), (1, "right")):
                j = idx[2 * b + side]
                s = stride if j < 2 else 1
                with net.scope(name):
                    outs.append(_apply_op(net, states[j], ops[2 * b + side], filters, s))
            states.append(net.add(outs[0], outs[1], name="add"))
    final = states[-1]
    keep = []
    for j, st in enumerate(states):
        if used[j]:
            continue
        if st.h != final.h or st.c != final.c:
            with net.scope("reduction_%d" % j):
                st = _factorized_reduction(net, st, filters, 2 if st.h != final.h else 1)
        keep.append(st)
    return net.concat(keep, name="concat")


def nasnet_a(batch=1, seed=0, num_cells=12, filters=44, image=224):
    """NASNet-A Mobile 4@1056: 2 stem reduction cells, 3 x 4 normal cells,
    2 reduction cells (16 cells), penultimate width 6*4*44 = 1056."""
    net = Net("nasnet_a", seed, batch, bn_eps=1e-3,
              doc="NASNet-A Mobile 4@1056 (Zoph et al. 2018), %dx%d, random weights"
              % (image, image))
    x = net.input("input", 3, image, image)
    with net.scope("stem"):
        x = net.conv(x, 32, 3, 2, 0, name="conv0")       # VALID: 224 -> 111
        x = net.bn(x, name="conv0_bn")
    outputs = [None, x]
    scaling = 0.25
    for i in range(2):
        with net.scope("cell_stem_%d" % i):
            x = _cell(net, x, outputs[-2], int(filters * scaling), True)
        outputs.append(x)
        scaling *= 2
    reduction_at = (num_cells // 3, 2 * num_cells // 3)
    red = 0
    for i in range(num_cells):
        if i in reduction_at:
            scaling *= 2
            with net.scope("reduction_cell_%d" % red):
                x = _cell(net, x, outputs[-2], int(filters * scaling), True)
            outputs.append(x)
            red += 1
        with net.scope("cell_%d" % i):
            x = _cell(net, x, outputs[-2], int(filters * scaling), False)
        outputs.append(x)
    with net.scope("head"):
        x = net.relu(x, name="relu")
        x = net.gap(x, name="avgpool")
        y = net.flatten(x, name="flatten")
        y = net.dropout(y, name="dropout")
        y = net.gemm(y, 1000, name="fc", out="logits")
        net.output(y)
    return net


# ===================================================================
# RandWire
# ===================================================================

def watts_strogatz(n, k, p, rng):
    """Undirected WS(n, k, p) as a sorted list of (u, v) with u < v.
    Ring lattice with k/2 neighbours per side; each lattice edge (u, u+j) is
    rewired with probability p to (u, w), w uniform over the nodes that are
    neither u nor already adjacent to u (Watts & Strogatz 1998)."""
    assert k % 2 == 0 and k < n
    adj = [set() for _ in range(n)]
    for u in range(n):
        for j in range(1, k // 2 + 1):
            v = (u + j) % n
            adj[u].add(v)
            adj[v].add(u)
    for j in range(1, k // 2 + 1):
        for u in range(n):
            v = (u + j) % n
            if rng.random() < p:
                if v not in adj[u]:
                    continue        # already rewired away
                cand = [w for w in range(n) if w != u and w not in adj[u]]
                if not cand:
                    continue
                w = cand[int(rng.integers(len(cand)))]
                adj[u].discard(v)
                adj[v].discard(u)
                adj[u].add(w)
                adj[w].add(u)
    return sorted((u, v) for u in range(n) for v in adj[u] if u < v)


def _rw_node(net, inputs, weights, cout, stride):
    """Aggregate (sigmoid-weighted sum) -> ReLU -> sep conv 3x3 -> BN."""
    if len(inputs) == 1:
        x = inputs[0]
    else:
        terms = [net.mul_scalar(t, w, name="agg_mul%d" % i)
                 for i, (t, w) in enumerate(zip(inputs, weights))]
        x = net.sum(terms, name="agg_sum")
    x = net.relu(x, name="relu")
    x = net.conv(x, x.c, 3, stride, 1, group=x.c, name="depthwise")
    x = net.conv(x, cout, 1, name="pointwise", gain=1.0)
    return net.bn(x, name="bn")


def _rw_stage(net, x, n, cout, graph_rng, edges_log):
    edges = watts_strogatz(n, 4, 0.75, graph_rng)
    edges_log.append((n, edges))
    preds = [[] for _ in range(n)]
    succ = [0] * n
    for u, v in edges:           # DAG: lower index -> higher index
        preds[v].append(u)
        succ[u] += 1
    outs = [None] * n
    for v in range(n):           # index order is a topological order
        with net.scope("node%d" % v):
            if not preds[v]:
                outs[v] = _rw_node(net, [x], None, cout, 2)
            else:
                srcs = [outs[u] for u in preds[v]]
                # learned positive aggregation weights sigmoid(w), folded to
                # constants and normalised (sum of squares 1) so that the
                # aggregate keeps unit scale; python floats for determinism
                raw = [float(t) for t in net.normal((len(srcs),), 1.0)]
                w = [1.0 / (1.0 + math.exp(-t)) for t in raw]
                norm = math.sqrt(math.fsum(t * t for t in w))
                outs[v] = _rw_node(net, srcs, [t / norm for t in w], cout, 1)
    sinks = [outs[v] for v in range(n) if succ[v] == 0]
    with net.scope("output"):
        if len(sinks) == 1:
            return sinks[0]
        y = net.sum(sinks, name="sum")
        return net.mul_scalar(y, 1.0 / len(sinks), name="mean")


RANDWIRE_NODES = (32, 32, 32)   # paper Table 1, small regime: conv3..conv5 = N, N, N (N=32)


def randwire(batch=1, seed=0, channels=78, nodes=RANDWIRE_NODES, image=224):
    net = Net("randwire", seed, batch,
              doc="RandWire-WS(4,0.75) small regime C=%d (Xie et al. 2019), "
                  "%dx%d, random weights, graph seed %d" % (channels, image, image, seed))
    c = channels
    x = net.input("input", 3, image, image)
    with net.scope("conv1"):
        x = net.bn(net.conv(x, c // 2, 3, 2, 1, name="conv"), name="bn")   # 112
    with net.scope("conv2"):
        x = net.relu(x, name="relu")
        x = net.bn(net.conv(x, c, 3, 2, 1, name="conv"), name="bn")        # 56
    net.randwire_edges = []
    for i, (n, cout) in enumerate(zip(nodes, (c, 2 * c, 4 * c))):
        g = np.random.default_rng([seed, 0x5157, i])  # graph stream, separate from weights
        with net.scope("conv%d" % (i + 3)):
            x = _rw_stage(net, x, n, cout, g, net.randwire_edges)
    with net.scope("classifier"):
        x = net.relu(x, name="relu")
        x = net.conv(x, 1280, 1, name="conv")
        x = net.relu(net.bn(x, name="bn"), name="relu_out")
        x = net.gap(x, name="avgpool")
        y = net.flatten(x, name="flatten")
        y = net.gemm(y, 1000, name="fc", out="logits")
        net.output(y)
    return net
