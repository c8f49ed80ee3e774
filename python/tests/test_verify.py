"""verify() against the kit's own data (passes), planted errors (fail naming the first step
and tensor), bad input (raises), and, with PTSUITE_BIN, against `ptsuite golden verify
--format json` on the same files: same verdict, first failing step and tensor, and the same
values to 1e-9 relative (the norms' summation order may differ in the last bits)."""
import json
import math
import os
import subprocess

import numpy as np
import pytest
from safetensors.numpy import save_file

import ptsuite_golden as pg
from conftest import ptsuite_bin


def golden_results(kit, float32=False):
    """(losses, params of every saved step, grads) as the kit's float64 or float32 run."""
    if float32:
        f = kit.float32_run()
        params = {f"step.{k}.{p.name}": f[f"step.{k}.{p.name}"] for k in kit.saved_steps for p in kit.params}
        return f["losses"], params, {p.name: f[f"grads.{p.name}"] for p in kit.params}
    params = {f"step.{k}.{n}": v for k in kit.saved_steps for n, v in kit.params_after(k).items()}
    return kit.losses(), params, kit.grads()


def test_golden_passes_itself(kits):
    for d in kits:
        kit = pg.load_kit(d)
        losses, params, grads = golden_results(kit)
        r = pg.verify(kit, losses=losses, params=params, grads=grads)
        assert r.passed and r.exit_code == 0, r.text()
        assert r.max_loss_value == 0 and len(r.tensors) == len(kit.params) * (len(kit.saved_steps) + 1)
        if kit.float32:
            r32 = pg.verify(kit, *golden_results(kit, float32=True))
            assert r32.passed and r32.rule.precision, r32.text()


def test_planted_errors_name_step_and_tensor(kits):
    kit = pg.load_kit(kits[0])
    losses, params, grads = golden_results(kit)
    last = kit.saved_steps[-1]
    name = kit.params[2].name
    params[f"step.{last}.{name}"] = params[f"step.{last}.{name}"] * (1 + 1e-9)
    r = pg.verify(kit, losses=losses, params=params)
    assert not r.passed and r.first_failing_step == last
    assert (r.first_failing_tensor.name, r.first_failing_tensor.file) == (name, "params")
    assert r.tensors[0].name == name and "first failing tensor " + name in r.summary
    # A bad gradient fails at step 0 and is named before any parameter.
    g = dict(grads)
    g[kit.params[1].name] = g[kit.params[1].name] + 1e-3
    r = pg.verify(kit, losses=losses, params=params, grads=g)
    assert r.first_failing_step == 0 and r.first_failing_tensor.name == kit.params[1].name
    assert r.first_failing_tensor.file == "grads"
    # A loss off at step 1 is the reason at step 1.
    bad = np.array(losses, dtype=np.float64)
    bad[1] *= 1 + 1e-10
    r = pg.verify(kit, losses=bad)
    assert r.first_failing_step == 1 and "loss rel_err" in r.summary and r.first_failing_tensor is None
    # NaN fails.
    bad[0] = math.nan
    assert pg.verify(kit, losses=bad).first_failing_step == 0


def test_tolerance_is_the_manifests(kits):
    kit = pg.load_kit(kits[0])
    losses = kit.losses()
    assert kit.rel_tol == kit.manifest["tolerances"]["float64"]["rel_tol"] == 1e-12
    assert pg.verify(kit, losses=losses * (1 + 0.5e-12)).passed
    assert not pg.verify(kit, losses=losses * (1 + 4e-12)).passed


def test_bad_input_raises(kits, tmp_path):
    kit = pg.load_kit(kits[0])
    losses, params, grads = golden_results(kit)
    with pytest.raises(pg.ResultsError, match="steps, the kit has"):
        pg.verify(kit, losses=losses[:-1])
    with pytest.raises(pg.ResultsError, match="is not a kit name"):
        pg.verify(kit, grads={**grads, "nope": grads[kit.params[0].name]})
    wrong = dict(grads)
    wrong[kit.params[0].name] = wrong[kit.params[0].name].ravel()[:-1]
    with pytest.raises(pg.ResultsError, match="has shape"):
        pg.verify(kit, grads=wrong)
    short = dict(grads)
    del short[kit.params[-1].name]
    with pytest.raises(pg.ResultsError, match="lacks tensor"):
        pg.verify(kit, grads=short)
    with pytest.raises(pg.ResultsError, match="F32 tensors cannot meet"):
        pg.verify(kit, grads={n: v.astype(np.float32) for n, v in grads.items()}, dtype="float64")
    csv = tmp_path / "l.csv"
    csv.write_text("step,loss\n0,1\n2,1\n")
    with pytest.raises(pg.ResultsError, match="where step 1 comes next"):
        pg.verify(kit, losses=str(csv))
    csv.write_text("step,loss\n" + "".join(f"{k},1\n" for k in range(kit.steps + 1)))
    with pytest.raises(pg.ResultsError, match="more than the kit's"):
        pg.verify(kit, losses=str(csv))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(pg.ResultsError, match="not a regular file"):
        pg.verify(kit, losses=str(fifo))


def test_files_equal_in_memory(kits, tmp_path):
    kit = pg.load_kit(kits[0])
    losses, params, grads = golden_results(kit)
    pg.write_losses_csv(tmp_path / "losses.csv", losses)
    save_file(params, str(tmp_path / "params.safetensors"))
    r = pg.verify(kit, losses=str(tmp_path / "losses.csv"), params=str(tmp_path / "params.safetensors"))
    assert r.passed and [x.yours for x in r.losses] == list(losses)


def _cases(kit):
    """(label, losses, params, grads) judged by both verifiers."""
    losses, params, grads = golden_results(kit)
    yield "golden", losses, params, grads
    p = dict(params)
    last = kit.saved_steps[-1]
    n = kit.params[-1].name
    p[f"step.{last}.{n}"] = p[f"step.{last}.{n}"] + 1e-7
    g = dict(grads)
    g[kit.params[0].name] = g[kit.params[0].name] * 1.01
    yield "planted", losses * (1 + 1e-11), p, g
    last_only = {n: v for n, v in params.items() if n.startswith(f"step.{last}.")}
    yield "last-as-name", losses, {n.split(".", 2)[2]: v for n, v in last_only.items()}, None
    if kit.float32:
        l32, p32, g32 = golden_results(kit, float32=True)
        yield "float32", l32, p32, g32
        p32 = dict(p32)
        p32[f"step.{last}.{kit.params[0].name}"] = p32[f"step.{last}.{kit.params[0].name}"] * np.float32(1.001)
        yield "float32-planted", l32, p32, g32


@pytest.mark.skipif(not ptsuite_bin(), reason="PTSUITE_BIN not set")
def test_same_verdict_as_cli(kits, tmp_path):
    for n, d in enumerate(kits):
        kit = pg.load_kit(d)
        for label, losses, params, grads in _cases(kit):
            out = tmp_path / f"{n}-{d.name}-{label}"
            out.mkdir()
            pg.write_losses_csv(out / "losses.csv", losses)
            cmd = [ptsuite_bin(), "golden", "verify", str(d), "--losses", str(out / "losses.csv"), "--format", "json"]
            if params is not None:
                save_file({n: np.ascontiguousarray(v) for n, v in params.items()}, str(out / "p.safetensors"))
                cmd += ["--params", str(out / "p.safetensors")]
            if grads is not None:
                save_file({n: np.ascontiguousarray(v) for n, v in grads.items()}, str(out / "g.safetensors"))
                cmd += ["--grads", str(out / "g.safetensors")]
            cli = subprocess.run(cmd, capture_output=True, text=True)
            assert cli.returncode in (0, 1), (label, cli.stderr)
            want = json.loads(cli.stdout)
            got = pg.verify(kit, losses=str(out / "losses.csv"),
                            params=None if params is None else str(out / "p.safetensors"),
                            grads=None if grads is None else str(out / "g.safetensors")).to_dict()
            where = f"{d.name} {label}"
            assert got["verdict"] == want["verdict"] and cli.returncode == (0 if got["verdict"] == "PASS" else 1), where
            assert got["rule"] == want["rule"] and got["limit"] == want["limit"], where
            assert got["first_failing_step"] == want["first_failing_step"], where
            assert got["first_failing_tensor"] == want["first_failing_tensor"], where
            key = "err_ratio" if "float32" in got["rule"] else "rel_err"
            for section in ("losses", "whole", "tensors"):
                assert len(got[section]) == len(want[section]), (where, section)
                for a, b in zip(sorted(got[section], key=lambda r: (r.get("file", ""), r.get("name", ""), r["step"])),
                                sorted(want[section], key=lambda r: (r.get("file", ""), r.get("name", ""), r["step"]))):
                    assert a["verdict"] == b["verdict"], (where, section, a, b)
                    assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-300), (where, section, a, b)


def test_command_line_exit_codes(kits, tmp_path, capsys):
    from ptsuite_golden.__main__ import main
    kit = pg.load_kit(kits[0])
    losses, params, grads = golden_results(kit)
    pg.write_losses_csv(tmp_path / "ok.csv", losses)
    save_file({n: np.ascontiguousarray(v) for n, v in grads.items()}, str(tmp_path / "g.safetensors"))
    assert main(["verify", str(kits[0]), "--losses", str(tmp_path / "ok.csv"), "--grads", str(tmp_path / "g.safetensors")]) == 0
    pg.write_losses_csv(tmp_path / "bad.csv", losses * 1.01)
    capsys.readouterr()
    assert main(["verify", str(kits[0]), "--losses", str(tmp_path / "bad.csv"), "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "FAIL" and out["first_failing_step"] == 0
    assert main(["verify", str(tmp_path), "--losses", str(tmp_path / "ok.csv")]) == 2
    assert main(["regen", str(kits[0])]) == 0
