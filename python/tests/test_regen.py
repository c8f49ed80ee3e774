"""Regeneration from the manifest alone equals the C++ export bit for bit: every initial
parameter and every step's batch, in every kit (committed and, with PTSUITE_BIN, exported
with other seeds, optimizers and batch sizes)."""
import numpy as np

import ptsuite_golden as pg


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint64) if a.dtype == np.float64 else a


def test_init_params_bitwise(kits):
    for d in kits:
        kit = pg.load_kit(d)
        mine, ref = pg.init_params(kit), kit.init_params()
        assert list(mine) == kit.param_names() and set(ref) == set(mine)
        for name in ref:
            assert mine[name].dtype == ref[name].dtype and mine[name].shape == ref[name].shape, (d, name)
            assert np.array_equal(bits(mine[name]), bits(ref[name])), f"{d}: {name} differs"


def test_batches_bitwise(kits):
    for d in kits:
        kit = pg.load_kit(d)
        for step in range(kit.steps):
            mine, ref = pg.batch(kit, step), kit.batch(step)
            assert set(mine) == set(ref), (d, step)
            for name in ref:
                assert mine[name].dtype == ref[name].dtype and mine[name].shape == ref[name].shape, (d, step, name)
                assert np.array_equal(bits(mine[name]), bits(ref[name])), f"{d}: step {step} {name} differs"


def test_float32_cast_rounds_the_double(kits):
    kit = pg.load_kit(kits[0])
    p32, p64 = pg.init_params(kit, np.float32), pg.init_params(kit)
    for name in p64:
        assert p32[name].dtype == np.float32 and np.array_equal(p32[name], p64[name].astype(np.float32))
