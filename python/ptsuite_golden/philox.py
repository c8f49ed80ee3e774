"""Philox4x32-10 (Salmon et al., SC'11) vectorised over numpy arrays of indices, and the
exact uniform and normal mappings of ptsuite's core/rng.cpp, so that every value a kit
was made from can be regenerated bit for bit.

Counter = (index lo, index hi, stream lo, stream hi), key = (seed lo, seed hi); see the
manifest's `rng` section and golden/MANIFEST.md "The generator".
"""
import math

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # Weyl key increments
ROUNDS = 10
_MASK32 = np.uint64(0xFFFFFFFF)
_TWO_POW_M52 = 2.0 ** -52


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """The raw block function on uint32 counter words (arrays or scalars, broadcast) and a
    key of two ints; returns four uint32 arrays w0..w3."""
    c = [np.asarray(x, dtype=np.uint64) & _MASK32 for x in np.broadcast_arrays(c0, c1, c2, c3)]
    k0, k1 = int(k0) & 0xFFFFFFFF, int(k1) & 0xFFFFFFFF
    m0, m1, s32 = np.uint64(M0), np.uint64(M1), np.uint64(32)
    for _ in range(ROUNDS):
        p0 = m0 * c[0]  # < 2^64: a 32 x 32-bit product is exact in uint64
        p1 = m1 * c[2]
        c = [(p1 >> s32) ^ c[1] ^ np.uint64(k0), p1 & _MASK32, (p0 >> s32) ^ c[3] ^ np.uint64(k1), p0 & _MASK32]
        k0 = (k0 + W0) & 0xFFFFFFFF
        k1 = (k1 + W1) & 0xFFFFFFFF
    return [x.astype(np.uint32) for x in c]


class CounterRng:
    """Every value is a pure function of (seed, stream, index), as pts::CounterRng."""

    def __init__(self, seed, stream):
        self.seed, self.stream = int(seed), int(stream)

    def words(self, index):
        """Four uint32 arrays for the uint64 indices `index` (array-like)."""
        idx = np.asarray(index, dtype=np.uint64)
        s = self.stream
        return philox4x32_10(idx & _MASK32, idx >> np.uint64(32), s & 0xFFFFFFFF, s >> 32,
                             self.seed & 0xFFFFFFFF, self.seed >> 32)

    def uniform(self, index):
        """Uniform in (0, 1) from words 0-1: ((hi << 32 | lo) >> 12 + 1/2) 2^-52, exact."""
        w = self.words(index)
        return to_unit(w[0], w[1])

    def normal(self, index):
        """Box-Muller, sqrt(-2 ln u1) cos(2 pi u2), with the C library's log and cos (via
        Python's math module, which calls them): numpy's vectorised log/cos may differ from
        glibc in the last bit, so they are not used here."""
        w = self.words(index)
        u1, u2 = to_unit(w[0], w[1]), to_unit(w[2], w[3])
        shape = u1.shape
        log_u1 = np.fromiter(map(math.log, u1.ravel().tolist()), dtype=np.float64, count=u1.size)
        two_pi_u2 = (2.0 * math.pi) * u2.ravel()  # 2 pi is folded to one constant in C++ too
        cos_u2 = np.fromiter(map(math.cos, two_pi_u2.tolist()), dtype=np.float64, count=u2.size)
        return (np.sqrt(-2.0 * log_u1) * cos_u2).reshape(shape)


def to_unit(hi, lo):
    """52 bits of (hi, lo) mapped to (0, 1): (k + 1/2) / 2^52 is exact in a double."""
    bits = ((np.asarray(hi, dtype=np.uint64) << np.uint64(32)) | np.asarray(lo, dtype=np.uint64)) >> np.uint64(12)
    return (bits.astype(np.float64) + 0.5) * _TWO_POW_M52
