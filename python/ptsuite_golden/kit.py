"""A golden kit on disk (golden/MANIFEST.md): manifest.json read and every file's sha256
and size checked against it, then the safetensors files loaded as {name: numpy array}."""
import hashlib
import json
import os

import numpy as np
from safetensors.numpy import load_file

FORMAT, VERSION = "ptsuite-golden", 1
MAX_STEPS = 100000  # kGoldenMaxSteps (harness/golden.hpp), the suite's own limit
REQUIRED_FILES = ("params_init.safetensors", "grads.safetensors", "params.safetensors",
                  "losses.safetensors", "batches.safetensors")


class KitError(ValueError):
    """A kit that is missing, malformed or altered (golden verify's exit 2)."""


class ResultsError(ValueError):
    """Results that cannot be judged: wrong steps, names, shapes or dtypes (exit 2)."""


def saved_steps(steps, every):
    """Steps every-1, 2 every-1, ... below `steps`, and always steps-1."""
    out = list(range(every - 1, steps, every))
    if not out or out[-1] != steps - 1:
        out.append(steps - 1)
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Param:
    """One canonical tensor of the manifest's `params` list."""

    def __init__(self, entry):
        self.name = entry["name"]
        self.shape = tuple(int(d) for d in entry["shape"])
        self.offset = int(entry["offset"])
        self.numel = int(entry["numel"])
        self.layout = entry.get("layout", "")
        init = entry["init"]
        self.init_kind = init["kind"]
        self.init_std = float(init.get("std", 0.0))
        self.init_value = float(init.get("value", 0.0))
        self.stream = int(init.get("stream", 0))

    def __repr__(self):
        return f"Param({self.name!r}, {self.shape})"


class Kit:
    """A checked kit. Construction reads the manifest and checks every listed file (present,
    sha256 and byte count as stated); the tensors are read lazily, once."""

    def __init__(self, path):
        self.dir = os.fspath(path)
        mpath = os.path.join(self.dir, "manifest.json")
        if not os.path.isfile(mpath):  # also refuses a FIFO, which open() would wait on
            raise KitError(f"{mpath}: missing or not a regular file; a golden kit is a directory made by golden export")
        try:
            with open(mpath, "rb") as f:
                self.manifest = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise KitError(f"{mpath}: malformed manifest: {e}") from None
        try:
            self._check(mpath)
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, KitError):
                raise
            raise KitError(f"{mpath}: malformed manifest: {e!r}") from None
        self._cache = {}

    def _check(self, mpath):
        m = self.manifest
        if m.get("format") != FORMAT or m.get("version") != VERSION:
            raise KitError(f"{mpath}: not a {FORMAT} version {VERSION} manifest")
        t = m["training"]
        self.workload = m["workload"]["name"]
        self.steps, self.every = int(t["steps"]), int(t["every"])
        self.global_batch, self.seed = int(t["global_batch"]), int(t["seed"])
        if not 1 <= self.steps <= MAX_STEPS or self.every < 1:
            raise KitError(f"{mpath}: training.steps must be 1..{MAX_STEPS} and every at least 1")
        self.saved_steps = [int(k) for k in t["saved_steps"]]
        if self.saved_steps != saved_steps(self.steps, self.every):
            raise KitError(f"{mpath}: training.steps, every and saved_steps disagree")
        self.optimizer = dict(t["optimizer"])
        self.architecture = m["architecture"]
        self.float32 = bool(m["float32"])
        self.params = [Param(p) for p in m["params"]]
        offset = 0
        for p in self.params:
            if p.offset != offset or p.numel != int(np.prod(p.shape, dtype=np.int64)):
                raise KitError(f"{mpath}: params entry {p.name} has offset/numel inconsistent with the list")
            offset += p.numel
        self.num_params = offset
        tol = m["tolerances"]
        self.rel_tol = float(tol["float64"]["rel_tol"])
        self.max_ratio = float(tol["float32"]["max_ratio"])
        self.floor_rel = float(tol["float32"]["floor_rel"])
        needed = set(REQUIRED_FILES) | ({"float32.safetensors"} if self.float32 else set())
        for name, f in m["files"].items():
            needed.discard(name)
            if "/" in name or ".." in name:
                raise KitError(f"{mpath}: file name '{name}' leaves the kit")
            p = os.path.join(self.dir, name)
            if not os.path.isfile(p):
                raise KitError(f"{p}: listed in the manifest but missing")
            if os.path.getsize(p) != int(f["bytes"]) or sha256_file(p) != f["sha256"]:
                raise KitError(f"{p}: sha256 differs from the manifest's (the file was altered or truncated)")
        if needed:
            raise KitError(f"{mpath}: lists no {sorted(needed)[0]}")

    # -- tensors -------------------------------------------------------------------------
    def file(self, name):
        """All tensors of one kit file, {name: numpy array} (checked above, read once)."""
        if name not in self._cache:
            if name == "float32.safetensors" and not self.float32:
                raise KitError(f"{self.dir}: the kit has no float32 run (exported with --no-float32)")
            self._cache[name] = load_file(os.path.join(self.dir, name))
        return self._cache[name]

    def param_names(self):
        return [p.name for p in self.params]

    def init_params(self):
        """{name: float64 array}: the initial parameters."""
        return dict(self.file("params_init.safetensors"))

    def grads(self):
        """{name: float64 array}: gradients of step 0's loss at the initial parameters."""
        return dict(self.file("grads.safetensors"))

    def losses(self):
        """float64 [steps]: losses[k] is step k's loss before step k's update."""
        return self.file("losses.safetensors")["losses"]

    def params_after(self, step):
        """{name: float64 array}: the parameters after step `step` (a saved step)."""
        if step not in self.saved_steps:
            raise KeyError(f"the kit stores parameters after steps {self.saved_steps}, not {step}")
        f = self.file("params.safetensors")
        return {p.name: f[f"step.{step}.{p.name}"] for p in self.params}

    def batch(self, step):
        """{'x' or 'tokens', 'labels': array} of step `step`'s global batch."""
        f = self.file("batches.safetensors")
        prefix = f"step.{step}."
        return {k[len(prefix):]: v for k, v in f.items() if k.startswith(prefix)}

    def float32_run(self):
        """The single-device float32 run: {'losses', 'grads.<name>', 'step.<k>.<name>'}."""
        return dict(self.file("float32.safetensors"))

    def __repr__(self):
        return f"Kit({self.dir!r}, {self.workload}, {self.steps} steps, batch {self.global_batch})"


def load_kit(path):
    """A Kit, or the Kit itself when given one."""
    return path if isinstance(path, Kit) else Kit(path)
