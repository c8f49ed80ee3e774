"""Regenerates a kit's initial parameters and every step's batch from its manifest alone,
bit for bit as ptsuite's C++ makes them (workloads/params.cpp, data.cpp, tokens.cpp).

Dimensions: B = global batch, S = seq, V = vocab, I = in_dim, H = the teacher's hidden 32.
"""
import math

import numpy as np

from .kit import KitError, load_kit
from .philox import CounterRng

# Streams of the data (workloads/data.cpp, tokens.cpp); the parameters' are in the manifest.
INPUT_STREAM, TEACHER1_STREAM, TEACHER2_STREAM = 1, 2, 3
SUCCESSOR_STREAM, DRAW_STREAM = 10, 11


def init_params(kit, dtype=np.float64):
    """{name: array} of the initial parameters: element i (row-major) of a random tensor is
    std * normal(i) from its stream, the product in double, then cast to `dtype` (a float32
    run rounds the double to nearest); a constant tensor is its value."""
    kit = load_kit(kit)
    out = {}
    for p in kit.params:
        if p.init_kind == "normal" and p.init_std > 0:
            v = p.init_std * CounterRng(kit.seed, p.stream).normal(np.arange(p.numel, dtype=np.uint64))
        elif p.init_kind in ("normal", "constant"):
            v = np.full(p.numel, p.init_value, dtype=np.float64)
        else:
            raise KitError(f"{kit.dir}: params entry {p.name} has init kind '{p.init_kind}'")
        out[p.name] = v.astype(dtype).reshape(p.shape)
    return out


def _tanh(a):
    return np.fromiter(map(math.tanh, a.ravel().tolist()), dtype=np.float64, count=a.size).reshape(a.shape)


def teacher_batch(kit, step, dtype=np.float64):
    """mlp: {'x': [B, I], 'labels': int64 [B]} of step `step`. The labels come from the
    teacher in double on the double inputs, whatever `dtype`."""
    kit = load_kit(kit)
    a, d = kit.architecture, kit.manifest["data"]
    if d["kind"] != "teacher":
        raise KitError(f"{kit.dir}: data kind is '{d['kind']}', not teacher")
    in_dim, classes = int(a["in_dim"]), int(a["classes"])
    hidden = int(d["teacher"]["hidden"])
    B = kit.global_batch
    t1 = (1.0 / math.sqrt(in_dim)) * CounterRng(kit.seed, TEACHER1_STREAM).normal(
        np.arange(in_dim * hidden, dtype=np.uint64)).reshape(in_dim, hidden)
    t2 = CounterRng(kit.seed, TEACHER2_STREAM).normal(np.arange(hidden * classes, dtype=np.uint64)).reshape(hidden, classes)
    first = step * B * in_dim
    x = CounterRng(kit.seed, INPUT_STREAM).normal(np.arange(first, first + B * in_dim, dtype=np.uint64)).reshape(B, in_dim)
    # The sums run in index order, one rounding per multiply and per add (as the C++ loop),
    # vectorised over samples and units, never as a BLAS product (which reorders them).
    acc = np.zeros((B, hidden))
    for j in range(in_dim):
        acc = acc + x[:, j:j + 1] * t1[j]
    h = _tanh(acc)
    score = np.zeros((B, classes))
    for k in range(hidden):
        score = score + h[:, k:k + 1] * t2[k]
    labels = np.argmax(score, axis=1).astype(np.int64)  # argmax: the first maximum wins
    return {"x": x.astype(dtype), "labels": labels}


def successor_table(kit):
    """gpt: int64 [V, 4], succ(t, j) = w0 of words(4 t + j) from stream 10, mod V."""
    kit = load_kit(kit)
    V = int(kit.architecture["vocab"])
    w0 = CounterRng(kit.seed, SUCCESSOR_STREAM).words(np.arange(4 * V, dtype=np.uint64))[0]
    return (w0.astype(np.uint64) % np.uint64(V)).astype(np.int64).reshape(V, 4)


def markov_batch(kit, step):
    """gpt: {'tokens': int64 [B, S], 'labels': int64 [B, S]} of step `step`."""
    kit = load_kit(kit)
    d = kit.manifest["data"]
    if d["kind"] != "markov" or d.get("data", "synthetic") not in ("", "synthetic"):
        raise KitError(f"{kit.dir}: data is not the synthetic markov stream; use batches.safetensors")
    V, S = int(kit.architecture["vocab"]), int(kit.architecture["seq"])
    probs = [float(p) for p in d["probabilities"]]
    B, L = kit.global_batch, S + 1
    succ = successor_table(kit)
    draw = CounterRng(kit.seed, DRAW_STREAM)
    n = np.arange(step * B, (step + 1) * B, dtype=np.uint64)
    base = n * np.uint64(L)
    r = np.zeros((B, L), dtype=np.int64)
    r[:, 0] = (draw.words(base)[0].astype(np.uint64) % np.uint64(V)).astype(np.int64)
    u = draw.uniform(base[:, None] + np.arange(1, L, dtype=np.uint64)[None, :])  # [B, S]
    # j = the first j with u <= p0 + ... + pj, the sums accumulated in double in order; the
    # last successor takes the rest.
    cum, acc = [], probs[0]
    for p in probs[1:]:
        cum.append(acc)
        acc += p
    j = np.zeros(u.shape, dtype=np.int64)
    for c in cum:
        j += u > c
    for t in range(1, L):
        r[:, t] = succ[r[:, t - 1], j[:, t - 1]]
    return {"tokens": r[:, :S].copy(), "labels": r[:, 1:].copy()}


def batch(kit, step, dtype=np.float64):
    """Step `step`'s global batch as batches.safetensors names it (mlp: x, labels; gpt:
    tokens, labels)."""
    kit = load_kit(kit)
    kind = kit.manifest["data"]["kind"]
    if kind == "teacher":
        return teacher_batch(kit, step, dtype)
    if kind == "markov":
        return markov_batch(kit, step)
    raise KitError(f"{kit.dir}: unknown data kind '{kind}'")
