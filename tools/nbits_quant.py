"""Block quantization of a [K, N] weight into ONNX Runtime's MatMulNBits layout, in numpy: the
form the tests write and that src/passes/quantize_weights_nbits.cpp must match.

  B           uint8 [N, k_blocks, block_size * bits / 8], values packed low bits first along K
  scales      float32 [N, k_blocks]
  zero_points uint8 [N, ceil(k_blocks * bits / 8)], packed the same way (asymmetric only)
"""
import numpy as np


def pack_rows(values, bits):
    """values: uint8 [rows, count] of `bits`-wide fields -> [rows, ceil(count * bits / 8)] bytes."""
    rows, count = values.shape
    per = 8 // bits
    padded = np.zeros((rows, -(-count // per) * per), np.uint8)
    padded[:, :count] = values
    out = np.zeros((rows, padded.shape[1] // per), np.uint8)
    for i in range(per):
        out |= (padded[:, i::per] << (i * bits)).astype(np.uint8)
    return out


def quantize(w, bits, block_size, symmetric):
    """w: float32 [K, N]. Returns (B, scales, zero_points or None, dequantized [K, N])."""
    k, n = w.shape
    blocks = -(-k // block_size)
    wt = np.zeros((n, blocks * block_size), np.float32)
    wt[:, :k] = w.T
    wb = wt.reshape(n, blocks, block_size)
    qmax = (1 << bits) - 1
    if symmetric:  # zero point 2^(bits-1), the op's default: q in [0, qmax], w = (q - mid) * s
        mid = 1 << (bits - 1)
        far = np.take_along_axis(wb, np.abs(wb).argmax(axis=2)[:, :, None], axis=2)[:, :, 0]
        scales = far / -mid  # the largest magnitude maps to code 0, as in src/onnx/nbits_weights_writer.cpp
        scales[scales == 0] = 1.0
        q = np.clip(np.rint(wb / scales[:, :, None]) + mid, 0, qmax)
        zp = np.full((n, blocks), mid, np.float32)
    else:
        lo = np.minimum(wb.min(axis=2), 0)
        hi = np.maximum(wb.max(axis=2), 0)
        scales = (hi - lo) / qmax
        scales[scales == 0] = 1.0
        zp = np.clip(np.rint(-lo / scales), 0, qmax)
        q = np.clip(np.rint(wb / scales[:, :, None]) + zp[:, :, None], 0, qmax)
    q = q.astype(np.uint8)
    # The padding beyond K holds the zero point's code, as ORT's quantizer leaves it.
    deq = ((q.astype(np.float32) - zp[:, :, None]) * scales[:, :, None]).reshape(n, -1)[:, :k].T
    b = pack_rows(q.reshape(n * blocks, block_size), bits).reshape(n, blocks, block_size * bits // 8)
    zero_points = None if symmetric else pack_rows(zp.astype(np.uint8), bits)
    return b, scales.astype(np.float32), zero_points, np.ascontiguousarray(deq, np.float32)


def round_int8_blocks(a, block):
    """A's rows rounded as ONNX Runtime's accuracy_level 4: per block, amax / 127 steps, half to even."""
    out = a.astype(np.float32).copy()
    for k0 in range(0, a.shape[1], block):
        part = a[:, k0:k0 + block].astype(np.float32)
        amax = np.abs(part).max(axis=1, keepdims=True)
        inverse = np.where(amax != 0, np.float32(127) / np.where(amax != 0, amax, 1), 0).astype(np.float32)
        out[:, k0:k0 + block] = np.round(part * inverse) * (amax / np.float32(127))
    return out
