"""Philox4x32-10 against the Random123 known-answer vectors (as core/rng_test.cpp), and the
mapping to (0, 1) at its ends."""
import numpy as np

from ptsuite_golden.philox import CounterRng, philox4x32_10, to_unit

KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def test_known_answers():
    for c, k, want in KAT:
        assert tuple(int(w) for w in philox4x32_10(*c, *k)) == want


def test_vectorised_equals_scalar_and_counter_layout():
    seed, stream = 0x0123456789ABCDEF, 0xFEDCBA9876543210
    idx = np.array([0, 1, 0x1122334455667788, 2**64 - 1], dtype=np.uint64)
    got = CounterRng(seed, stream).words(idx)
    for n, i in enumerate(idx.tolist()):
        want = philox4x32_10(i & 0xFFFFFFFF, i >> 32, stream & 0xFFFFFFFF, stream >> 32, seed & 0xFFFFFFFF, seed >> 32)
        assert [int(w[n]) for w in got] == [int(w) for w in want]


def test_unit_interval_is_open():
    lo, hi = to_unit(np.uint32(0), np.uint32(0)), to_unit(np.uint32(0xFFFFFFFF), np.uint32(0xFFFFFFFF))
    assert lo == 0.5 * 2.0 ** -52 and 0 < lo
    assert hi == 1 - 0.5 * 2.0 ** -52 and hi < 1


def test_normal_moments():
    z = CounterRng(1234, 7).normal(np.arange(200000, dtype=np.uint64))
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
