"""verify(): a user's losses, parameters and gradients judged against a kit in-process with
the rules of `ptsuite golden verify` (harness/golden_verify.cpp, harness/checks.hpp), the
tolerances read from the manifest's `tolerances`:

- float64, exact: |yours - golden| / |golden| per loss; ||yours - golden||_2 / ||golden||_2
  per tensor and per step's whole vector (the absolute norm when golden is 0), <= rel_tol.
- float32, error ratio: ||yours - golden64|| / max(||single32 - golden64||,
  floor_rel ||golden64||) <= max_ratio, single32 being the kit's float32 run.
"""
import csv
import json
import math
import os

import numpy as np
from safetensors.numpy import load_file

from .kit import ResultsError, load_kit


def _numpy(v):
    """numpy view of an array-like; torch tensors are detached and moved to the CPU."""
    if hasattr(v, "detach"):
        v = v.detach().cpu().numpy()
    return np.asarray(v)


def _l2(a):
    return math.sqrt(float(np.dot(a, a)))


class Rule:
    def __init__(self, kit, precision):
        self.precision = precision
        self.limit = kit.max_ratio if precision else kit.rel_tol
        self.floor_rel = kit.floor_rel
        self.name = "err_ratio" if precision else "rel_err"
        self.title = (f"float32 error ratio <= {self.limit:.3e} (floor {self.floor_rel:.3e} x ||golden||)"
                      if precision else f"float64 exact, relative error <= {self.limit:.3e}")

    def judge(self, yours, golden, single32=None):
        d, ng = _l2(yours - golden), _l2(golden)
        if not self.precision:
            return d if ng == 0 else d / ng
        denom = max(_l2(single32 - golden), self.floor_rel * ng)
        return d / denom if denom > 0 else (0.0 if d == 0 else math.inf)

    def passes(self, v):
        return math.isfinite(v) and v <= self.limit


class Row(dict):
    """A dict with attribute access: one judged loss, whole vector or tensor."""
    __getattr__ = dict.__getitem__


class Report:
    """The verdict. `passed`; `losses` (step, golden, yours, value, passed), `whole` (file,
    step, value, passed), `tensors` (file, name, step, max_abs, value, passed; worst first);
    `first_failing_step`, `first_failing_tensor` (file, name, step, value) or None;
    `summary`; `exit_code` (0 pass, 1 fail: golden verify's)."""

    def __init__(self, kit, rule):
        self.kit, self.rule = kit, rule
        self.losses, self.whole, self.tensors = [], [], []
        self.first_failing_step, self.first_failing_tensor = None, None
        self._first_why = ""
        self.notes = []

    def _fail_at(self, step, why):
        if self.first_failing_step is None or step < self.first_failing_step:
            self.first_failing_step, self._first_why = step, why

    @property
    def passed(self):
        return self.first_failing_step is None

    @property
    def exit_code(self):
        return 0 if self.passed else 1

    @property
    def max_loss_value(self):
        """The largest loss rel_err (float64) or err_ratio (float32) over the steps."""
        return max((r.value for r in self.losses), default=None)

    @property
    def summary(self):
        if self.passed:
            return f"PASS: {len(self.losses)} losses, {len(self.tensors)} tensors within the rule"
        s = f"FAIL: first failing step {self.first_failing_step} ({self._first_why})"
        t = self.first_failing_tensor
        if t:
            s += f"; first failing tensor {t.name} ({t.file}, step {t.step}, {self.rule.name} {t.value:.3e})"
        return s

    def to_dict(self):
        n = self.rule.name
        return {
            "kit": self.kit.dir, "workload": self.kit.workload,
            "rule": "float32 error_ratio" if self.rule.precision else "float64 exact", "limit": self.rule.limit,
            "losses": [{"step": r.step, "golden": r.golden, "yours": r.yours, n: r.value,
                        "verdict": "PASS" if r.passed else "FAIL"} for r in self.losses],
            "whole": [{"file": r.file, "step": r.step, n: r.value, "verdict": "PASS" if r.passed else "FAIL"}
                      for r in self.whole],
            "tensors": [{"file": r.file, "name": r.name, "step": r.step, "max_abs": r.max_abs, n: r.value,
                         "verdict": "PASS" if r.passed else "FAIL"} for r in self.tensors],
            "verdict": "PASS" if self.passed else "FAIL",
            "first_failing_step": self.first_failing_step,
            "first_failing_tensor": None if not self.first_failing_tensor else
            {k: self.first_failing_tensor[k] for k in ("file", "name", "step")},
            "summary": self.summary,
        }

    def to_json(self):
        return json.dumps(self.to_dict(), indent=1)

    def text(self, show=10):
        k, n = self.kit, self.rule.name
        out = [f"golden verify: kit {k.dir} ({k.workload}, {k.steps} steps, global batch {k.global_batch})",
               f"  rule: {self.rule.title}"]
        out += [f"  note: {x}" for x in self.notes]
        if self.losses:
            out.append("losses")
            out.append(f"  {'step':>4}  {'golden':<24} {'yours':<24} {n:<10} verdict")
            for r in self.losses:
                out.append(f"  {r.step:4d}  {r.golden!r:<24} {r.yours!r:<24} {r.value:<10.3e} "
                           f"{'PASS' if r.passed else 'FAIL'}")
        for what in ("grads", "params"):
            rows = [r for r in self.whole if r.file == what]
            if rows:
                out.append(f"{what}: whole vector per step (the suite's rule)")
            for r in rows:
                label = "step 0 (before the update)" if what == "grads" else f"after step {r.step}"
                out.append(f"  {label:<28} {n} {r.value:<10.3e} {'PASS' if r.passed else 'FAIL'}")
        if self.tensors:
            shown = self.tensors[:max(show, 0)]
            out.append(f"worst tensors ({len(shown)} of {len(self.tensors)})")
            out.append(f"  {'tensor':<34} {'from':<6} {'step':>4}  {'max_abs':<10} {n:<10} verdict")
            for r in shown:
                out.append(f"  {r.name:<34} {r.file:<6} {r.step:4d}  {r.max_abs:<10.3e} {r.value:<10.3e} "
                           f"{'PASS' if r.passed else 'FAIL'}")
        out.append(f"summary: {self.summary}")
        return "\n".join(out) + "\n"

    __str__ = text

    def __bool__(self):
        return self.passed


def read_losses_csv(path, steps):
    """`step,loss` CSV with one row per step 0..steps-1 in order (golden verify's --losses)."""
    if not os.path.isfile(path):  # a FIFO or a directory is refused, not waited on
        raise ResultsError(f"{path}: not found or not a regular file (losses)")
    out = []
    with open(path, newline="") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\r\n").rstrip(" \r")
            if n == 1:
                if line != "step,loss":
                    raise ResultsError(f"{path}:1: header is '{line}', expected 'step,loss'")
                continue
            if not line:
                continue
            step_text, comma, loss_text = line.partition(",")
            try:
                step = int(step_text, 10)
            except ValueError:
                step = None
            if not comma or step is None:
                raise ResultsError(f"{path}:{n}: expected 'step,loss', got '{line}'")
            try:
                loss = float(loss_text)
            except ValueError:
                raise ResultsError(f"{path}:{n}: loss '{loss_text}' is not a number") from None
            if len(out) == steps:
                raise ResultsError(f"{path}:{n}: more than the kit's {steps} steps")
            if step != len(out):
                raise ResultsError(f"{path}:{n}: step {step_text} where step {len(out)} comes next "
                                   "(rows are steps 0, 1, ... in order)")
            out.append(loss)
    if len(out) != steps:
        raise ResultsError(f"{path}: {len(out)} steps, the kit has {steps}")
    return np.array(out, dtype=np.float64)


def write_losses_csv(path, losses):
    """Writes losses as golden verify's --losses reads them (17 significant digits)."""
    with open(path, "w") as f:
        f.write("step,loss\n")
        for k, v in enumerate(losses):
            f.write(f"{k},{float(v)!r}\n")


def _losses(kit, losses):
    if isinstance(losses, (str, os.PathLike)):
        return read_losses_csv(losses, kit.steps)
    a = np.asarray([float(_numpy(v)) for v in losses], dtype=np.float64)
    if a.size != kit.steps:
        raise ResultsError(f"losses: {a.size} steps, the kit has {kit.steps}")
    return a


def _results(kit, source, grads):
    """{(step, canonical index): float64 array}, the dtype ('F64'/'F32'), a label. Step -1
    is grads'; '<name>' alone in params means the last step."""
    label = os.fspath(source) if isinstance(source, (str, os.PathLike)) else ("grads" if grads else "params")
    tensors = load_file(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else source
    index = {p.name: i for i, p in enumerate(kit.params)}
    last = kit.steps - 1
    steps_text = ", ".join(str(k) for k in kit.saved_steps)
    out, dtype = {}, None
    for name, value in tensors.items():
        a = _numpy(value)
        step, base = (-1 if grads else last), name
        if not grads and name.startswith("step."):
            k, dot, rest = name[5:].partition(".")
            ok = bool(dot) and k.isdigit() and int(k) in kit.saved_steps
            if not ok:
                raise ResultsError(f"{label}: tensor '{name}': the kit stores parameters after steps {steps_text}")
            step, base = int(k), rest
        if base not in index:
            form = "<name>" if grads else f"step.<k>.<name> for k in {{{steps_text}}}, or <name>"
            raise ResultsError(f"{label}: tensor '{name}' is not a kit name ({form} with <name> as in "
                               f"manifest.json params, e.g. {kit.params[0].name})")
        p = kit.params[index[base]]
        if a.dtype not in (np.float64, np.float32):
            raise ResultsError(f"{label}: tensor '{name}' is {a.dtype}; expected float64 or float32")
        if tuple(a.shape) != p.shape:
            raise ResultsError(f"{label}: tensor '{name}' has shape {list(a.shape)}, the kit's {p.name} is "
                               f"{list(p.shape)}")
        d = "F64" if a.dtype == np.float64 else "F32"
        if dtype is not None and d != dtype:
            raise ResultsError(f"{label}: tensor '{name}' is {d} but others are {dtype}")
        dtype = d
        key = (step, index[base])
        if key in out:
            raise ResultsError(f"{label}: tensor '{name}' is given twice (step.{last}.<name> and <name>)")
        out[key] = a.astype(np.float64).ravel()
    if not out:
        raise ResultsError(f"{label}: holds no tensors")
    for step in sorted({s for s, _ in out}):
        for i, p in enumerate(kit.params):
            if (step, i) not in out:
                where = "" if step < 0 else f"step {step} "
                raise ResultsError(f"{label}: {where}lacks tensor '{p.name}' (a step given must give every tensor)")
    return dict(sorted(out.items())), dtype, label


def verify(kit, losses=None, params=None, grads=None, dtype="auto"):
    """Judges results against the kit at `kit` (a directory or a Kit) and returns a Report.

    losses: per-step losses (a sequence, array, or a `step,loss` CSV path);
    params: {"step.<k>.<name>" or "<name>" (after the last step): array} or a safetensors
            path; all float64 (exact rule) or all float32 (error-ratio rule);
    grads:  {"<name>": array} or a safetensors path: step 0's gradients;
    dtype:  "auto" (from the tensors: float32 tensors choose the float32 rule), "float64"
            or "float32" (needed to judge losses alone by the float32 rule).
    Arrays may be numpy arrays or torch tensors. Raises KitError / ResultsError for bad
    input (golden verify's exit 2); `ptsuite golden verify` requires losses, this accepts
    any non-empty subset."""
    kit = load_kit(kit)
    if losses is None and params is None and grads is None:
        raise ResultsError("nothing to verify: give losses, params or grads")
    yl = None if losses is None else _losses(kit, losses)
    rp = None if params is None else _results(kit, params, grads=False)
    rg = None if grads is None else _results(kit, grads, grads=True)
    if dtype == "auto":
        d = rp[1] if rp else (rg[1] if rg else None)
        dtype = "float32" if d == "F32" else "float64"
    if dtype not in ("float64", "float32"):
        raise ResultsError(f"dtype '{dtype}': expected auto, float64 or float32")
    for r in (rp, rg):
        if r and dtype == "float64" and r[1] == "F32":
            raise ResultsError(f"{r[2]}: F32 tensors cannot meet the float64 exact rule; pass dtype='float32' for "
                               "the error-ratio rule")
    rule = Rule(kit, dtype == "float32")
    kit32 = kit.float32_run() if rule.precision else None  # raises KitError without a float32 run
    rep = Report(kit, rule)
    if yl is None:
        rep.notes.append("losses not given (ptsuite golden verify requires them)")
    else:
        golden = kit.losses()
        if golden.size != kit.steps:
            raise ResultsError(f"{kit.dir}: losses.safetensors has the wrong length")
        for s in range(kit.steps):
            single = kit32["losses"][s:s + 1] if rule.precision else None
            v = rule.judge(yl[s:s + 1], golden[s:s + 1], single)
            ok = rule.passes(v)
            if not ok:
                rep._fail_at(s, f"loss {rule.name} {v:.3e}")
            rep.losses.append(Row(step=s, golden=float(golden[s]), yours=float(yl[s]), value=v, passed=ok))

    rows = []
    kit_params, kit_grads = kit.file("params.safetensors"), kit.file("grads.safetensors")
    for what, r in (("grads", rg), ("params", rp)):
        if not r:
            continue
        whole = {}  # step -> [yours], [golden], [single32]
        for (step, i), yours in r[0].items():
            p = kit.params[i]
            kname = p.name if step < 0 else f"step.{step}.{p.name}"
            golden = (kit_grads if step < 0 else kit_params)[kname].ravel()
            single = kit32[f"grads.{p.name}" if step < 0 else kname].astype(np.float64).ravel() if rule.precision else None
            v = rule.judge(yours, golden, single)
            diff = np.abs(yours - golden)
            # As golden verify's std::max fold from 0: NaN differences are skipped here (the
            # rule's value, not max_abs, fails them).
            max_abs = float(np.max(np.where(np.isnan(diff), 0.0, diff), initial=0.0))
            rows.append(Row(file=what, name=p.name, step=max(step, 0), order=i, max_abs=max_abs, value=v,
                            passed=rule.passes(v)))
            w = whole.setdefault(step, ([], [], []))
            w[0].append(yours), w[1].append(golden)
            if single is not None:
                w[2].append(single)
        for step, (y, g, s1) in whole.items():
            v = rule.judge(np.concatenate(y), np.concatenate(g), np.concatenate(s1) if rule.precision else None)
            ok = rule.passes(v)
            label = "step 0 (before the update)" if step < 0 else f"after step {step}"
            if not ok:
                rep._fail_at(max(step, 0), f"{what} {label} {rule.name} {v:.3e}")
            rep.whole.append(Row(file=what, step=max(step, 0), value=v, passed=ok))

    # The first failing tensor: earliest step, gradients before parameters, canonical order.
    failing = [r for r in rows if not r.passed]
    if failing:
        t = min(failing, key=lambda r: (r.step, r.file == "params", r.order))
        rep.first_failing_tensor = t
        rep._fail_at(t.step, f"{t.file} {t.name}")
    rep.tensors = sorted(rows, key=lambda r: -(math.inf if math.isnan(r.value) else r.value))  # stable
    return rep
