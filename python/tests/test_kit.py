"""Kit loading: named tensors as the manifest lists them; a missing or altered file, or a
manifest of another format, is refused naming the file."""
import json
import shutil

import numpy as np
import pytest

import ptsuite_golden as pg


def test_names_shapes_and_files(kits):
    for d in kits:
        kit = pg.load_kit(d)
        assert sum(p.numel for p in kit.params) == kit.manifest["workload"]["num_params"]
        for tensors in (kit.init_params(), kit.grads()):
            assert list(tensors) == kit.param_names() or set(tensors) == set(kit.param_names())
            for p in kit.params:
                assert tensors[p.name].shape == p.shape and tensors[p.name].dtype == np.float64
        for k in kit.saved_steps:
            assert set(kit.params_after(k)) == set(kit.param_names())
        assert kit.losses().shape == (kit.steps,)
        if kit.float32:
            f = kit.float32_run()
            assert f[f"grads.{kit.params[0].name}"].dtype == np.float32


@pytest.fixture
def copy(kits, tmp_path):
    dst = tmp_path / "kit"
    shutil.copytree(kits[0], dst)
    return dst


def test_altered_file_refused(copy):
    p = copy / "grads.safetensors"
    data = bytearray(p.read_bytes())
    data[-1] ^= 1
    p.write_bytes(bytes(data))
    with pytest.raises(pg.KitError, match="grads.safetensors: sha256 differs"):
        pg.load_kit(copy)


def test_missing_file_refused(copy):
    (copy / "batches.safetensors").unlink()
    with pytest.raises(pg.KitError, match="batches.safetensors: listed in the manifest but missing"):
        pg.load_kit(copy)


def test_unlisted_required_file_refused(copy):
    m = json.loads((copy / "manifest.json").read_text())
    del m["files"]["losses.safetensors"]
    (copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(pg.KitError, match="lists no losses.safetensors"):
        pg.load_kit(copy)


def test_wrong_format_refused(copy):
    m = json.loads((copy / "manifest.json").read_text())
    m["version"] = 2
    (copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(pg.KitError, match="not a ptsuite-golden version 1"):
        pg.load_kit(copy)
