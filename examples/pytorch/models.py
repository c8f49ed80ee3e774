"""The kit's MLP and GPT in plain PyTorch, every dimension and convention read from
manifest.json (architecture), plus a tensor-parallel MLP simulated over shards in one
process. Each model maps its parameters to and from the kit's canonical names and layout.

Dimensions: B = batch, S = seq, C = embd, H = heads, D = head_dim, V = vocab, F = 4 C.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def gelu_module(arch):
    """The manifest's GELU: the tanh approximation 0.5 v (1 + tanh(c (v + a v^3))), which is
    PyTorch's GELU(approximate='tanh') when c = sqrt(2/pi) and a = 0.044715."""
    g = arch["gelu"]
    assert g["form"] == "tanh approximation", g
    assert math.isclose(g["c"], math.sqrt(2 / math.pi), rel_tol=1e-15) and g["a"] == 0.044715, g
    return nn.GELU(approximate="tanh")


class CanonicalMixin:
    """Canonical name <-> torch parameter: `layout` "[in, out] ..." tensors are stored
    transposed by nn.Linear ([out, in]); everything else is as the kit has it."""

    def canonical_map(self, kit):
        named = dict(self.named_parameters())
        out = []
        for p in kit.params:
            tname = self.TORCH_NAME.get(p.name, p.name)
            transpose = p.layout.startswith("[in, out]")
            assert tname in named, f"{p.name}: no torch parameter {tname}"
            want = tuple(reversed(p.shape)) if transpose else p.shape
            assert tuple(named[tname].shape) == want, (p.name, named[tname].shape, want)
            out.append((p.name, named[tname], transpose))
        return out

    @torch.no_grad()
    def load_canonical(self, kit, tensors):
        for name, param, transpose in self.canonical_map(kit):
            t = torch.as_tensor(tensors[name], dtype=param.dtype)
            param.copy_(t.t() if transpose else t)

    def canonical(self, kit, grads=False):
        """{canonical name: numpy array} of the parameters (or their .grad)."""
        out = {}
        for name, param, transpose in self.canonical_map(kit):
            t = (param.grad if grads else param).detach()
            out[name] = (t.t() if transpose else t).cpu().numpy().copy()  # a copy: the optimizer updates in place
        return out


class MLP(nn.Module, CanonicalMixin):
    """in_dim -> hidden_layers x (Linear, GELU) -> Linear head; logits [B, classes]."""
    TORCH_NAME = {}

    def __init__(self, arch):
        super().__init__()
        dims = [arch["in_dim"]] + [arch["width"]] * arch["hidden_layers"] + [arch["classes"]]
        self.layers = nn.ModuleList(nn.Linear(i, o) for i, o in zip(dims[:-1], dims[1:]))
        self.act = gelu_module(arch)

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = self.act(layer(x))
        return self.layers[-1](x)


class TensorParallelMLP(nn.Module):
    """The MLP with its first two layers in Megatron's pair, simulated over `tp` shards in
    one process: layer 0 column-parallel (shard r holds W0[:, cols_r], b0[cols_r]), layer 1
    row-parallel (W1[rows_r, :]), the partial products summed (the all-reduce `g`), b1 added
    once. `offset_bug` plants the classic slip: shard r >= 1 of the column split starts one
    column early when the canonical weight is scattered and gathered."""

    def __init__(self, arch, tp=2, offset_bug=False):
        super().__init__()
        assert arch["hidden_layers"] >= 2 and arch["width"] % tp == 0, arch
        self.tp, self.width, self.offset_bug = tp, arch["width"], offset_bug
        self.per = self.width // tp
        self.col = nn.ModuleList(nn.Linear(arch["in_dim"], self.per) for _ in range(tp))  # layer 0 shards
        self.row = nn.ModuleList(nn.Linear(self.per, self.width, bias=False) for _ in range(tp))  # layer 1 shards
        self.row_bias = nn.Parameter(torch.zeros(self.width))
        dims = [self.width] * (arch["hidden_layers"] - 1) + [arch["classes"]]
        self.rest = nn.ModuleList(nn.Linear(i, o) for i, o in zip(dims[:-1], dims[1:]))  # replicated
        self.act = gelu_module(arch)

    def begin(self, r):
        """First canonical column of shard r (the planted bug: one too early for r >= 1)."""
        return r * self.per - (1 if self.offset_bug and r > 0 else 0)

    def forward(self, x):
        partial = [self.row[r](self.act(self.col[r](x))) for r in range(self.tp)]
        h = self.act(torch.stack(partial).sum(0) + self.row_bias)
        for layer in self.rest[:-1]:
            h = self.act(layer(h))
        return self.rest[-1](h)

    @torch.no_grad()
    def load_canonical(self, kit, tensors):
        dt = self.row_bias.dtype
        w0, b0 = (torch.as_tensor(tensors[f"layers.0.{n}"], dtype=dt) for n in ("weight", "bias"))
        w1 = torch.as_tensor(tensors["layers.1.weight"], dtype=dt)
        for r in range(self.tp):
            c = slice(self.begin(r), self.begin(r) + self.per)
            self.col[r].weight.copy_(w0[:, c].t())
            self.col[r].bias.copy_(b0[c])
            self.row[r].weight.copy_(w1[r * self.per:(r + 1) * self.per, :].t())
        self.row_bias.copy_(torch.as_tensor(tensors["layers.1.bias"], dtype=dt))
        for l, layer in enumerate(self.rest):
            layer.weight.copy_(torch.as_tensor(tensors[f"layers.{l + 2}.weight"], dtype=dt).t())
            layer.bias.copy_(torch.as_tensor(tensors[f"layers.{l + 2}.bias"], dtype=dt))

    def canonical(self, kit, grads=False):
        """The shards gathered into the canonical tensors (the all-gather a checkpoint does)."""
        def v(p):
            return (p.grad if grads else p).detach()
        out = {}
        w0 = torch.zeros(self.col[0].in_features, self.width, dtype=self.row_bias.dtype)
        b0 = torch.zeros(self.width, dtype=self.row_bias.dtype)
        for r in range(self.tp):
            c = slice(self.begin(r), self.begin(r) + self.per)
            w0[:, c] = v(self.col[r].weight).t()
            b0[c] = v(self.col[r].bias)
        out["layers.0.weight"], out["layers.0.bias"] = w0, b0
        out["layers.1.weight"] = torch.cat([v(self.row[r].weight).t() for r in range(self.tp)], 0)
        out["layers.1.bias"] = v(self.row_bias)
        for l, layer in enumerate(self.rest):
            out[f"layers.{l + 2}.weight"], out[f"layers.{l + 2}.bias"] = v(layer.weight).t(), v(layer.bias)
        return {n: t.numpy().copy() for n, t in out.items()}


class CausalSelfAttention(nn.Module):
    """qkv = x W_qkv + b: q, k, v are the thirds of the columns, head h columns h D..(h+1) D
    of each; scores q k^T * scale (the manifest's scale), causal softmax, heads concatenated."""

    def __init__(self, arch):
        super().__init__()
        C, self.H = arch["embd"], arch["heads"]
        self.D, self.scale = arch["head_dim"], float(arch["attention"]["scale"])
        assert arch["attention"]["dropout"] == "none"
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        B, S, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, S, self.H, self.D).transpose(1, 2) for t in (q, k, v))  # [B, H, S, D]
        scores = (q @ k.transpose(-2, -1)) * self.scale
        mask = torch.ones(S, S, dtype=torch.bool).tril()
        att = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, S, C))


class FeedForward(nn.Module):
    def __init__(self, arch):
        super().__init__()
        C = arch["embd"]
        self.fc = nn.Linear(C, arch["mlp_hidden"])
        self.proj = nn.Linear(arch["mlp_hidden"], C)
        self.act = gelu_module(arch)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm: x1 = x + attn(ln1(x)); x = x1 + mlp(ln2(x1))."""

    def __init__(self, arch):
        super().__init__()
        eps = float(arch["layernorm"]["eps"])  # biased variance, as nn.LayerNorm
        self.ln1 = nn.LayerNorm(arch["embd"], eps=eps)
        self.attn = CausalSelfAttention(arch)
        self.ln2 = nn.LayerNorm(arch["embd"], eps=eps)
        self.mlp = FeedForward(arch)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module, CanonicalMixin):
    """wte[tokens] + wpe, L blocks, lnf, untied head without bias: logits [B, S, V]."""
    TORCH_NAME = {"wte": "wte.weight", "wpe": "wpe.weight"}

    def __init__(self, arch):
        super().__init__()
        C, V = arch["embd"], arch["vocab"]
        assert arch["head_dim"] * arch["heads"] == C
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(arch["seq"], C)
        self.blocks = nn.ModuleList(Block(arch) for _ in range(arch["layers"]))
        self.lnf = nn.LayerNorm(C, eps=float(arch["layernorm"]["eps"]))
        self.head = nn.Linear(C, V, bias=False)  # [V, C], the kit's layout: no transpose

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.lnf(x))


def make_model(arch, variant="plain", offset_bug=False):
    if arch["kind"] == "mlp":
        return TensorParallelMLP(arch, offset_bug=offset_bug) if variant == "tp2" else MLP(arch)
    if arch["kind"] == "gpt":
        assert variant == "plain", "the tensor-parallel example is the MLP's"
        return GPT(arch)
    raise ValueError(f"unknown architecture kind {arch['kind']}")


def loss_fn(logits, labels):
    """Softmax cross-entropy, mean over the batch's samples (mlp) or B x S positions (gpt)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
