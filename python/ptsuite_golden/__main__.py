"""Command line: `python -m ptsuite_golden verify KIT --losses F [--params F] [--grads F]`
(the rules and exit codes of `ptsuite golden verify`: 0 pass, 1 fail, 2 bad input) and
`python -m ptsuite_golden regen KIT` (regenerates the kit's parameters and batches and
says whether every tensor is bitwise equal to the kit's)."""
import argparse
import sys

import numpy as np

from . import regen
from .kit import KitError, ResultsError, load_kit
from .verify import verify


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint64) if a.dtype == np.float64 else a


def regen_check(kit):
    bad = []
    mine, ref = regen.init_params(kit), kit.init_params()
    for p in kit.params:
        if mine[p.name].shape != ref[p.name].shape or not np.array_equal(_bits(mine[p.name]), _bits(ref[p.name])):
            bad.append(f"params_init {p.name}")
    for step in range(kit.steps):
        b, r = regen.batch(kit, step), kit.batch(step)
        for name in r:
            if name not in b or b[name].shape != r[name].shape or not np.array_equal(_bits(b[name]), _bits(r[name])):
                bad.append(f"batch step {step} {name}")
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(prog="ptsuite-golden")
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="judge results against a kit")
    v.add_argument("kit")
    v.add_argument("--losses", required=True)
    v.add_argument("--params")
    v.add_argument("--grads")
    v.add_argument("--dtype", default="auto", choices=["auto", "float64", "float32"])
    v.add_argument("--format", default="text", choices=["text", "json"])
    v.add_argument("--show", type=int, default=10)
    g = sub.add_parser("regen", help="regenerate a kit's parameters and batches and compare bitwise")
    g.add_argument("kit")
    a = ap.parse_args(argv)
    try:
        kit = load_kit(a.kit)
        if a.cmd == "regen":
            bad = regen_check(kit)
            print(f"regen {kit.dir}: " + ("every tensor bitwise equal" if not bad else "differs: " + ", ".join(bad)))
            return 1 if bad else 0
        r = verify(kit, losses=a.losses, params=a.params, grads=a.grads, dtype=a.dtype)
        sys.stdout.write(r.to_json() + "\n" if a.format == "json" else r.text(a.show))
        return r.exit_code
    except (KitError, ResultsError, OSError) as e:
        print(f"ptsuite-golden: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
