"""Host-side helpers for quantized weights: packing (general_compress), the interleaved
layout the fast decode functions read (interleave_weight) and a 4-bit test weight
(gen_quant4). They take torch tensors or numpy arrays and return the same kind."""
from __future__ import annotations

import numpy as np

__all__ = ["gen_quant4", "general_compress", "interleave_weight", "interleave_positions"]


def _is_torch(x):
    return type(x).__module__.startswith("torch")


# ----------------------------------------------------------------------------- interleaving

def interleave_positions(nbits, target_dtype="float16"):
    """Where interleave_weight puts each field of a 32-bit word: entry ``o`` is the bit at
    which the field ``o`` (bits ``[o * nbits, (o + 1) * nbits)`` of the little-endian word)
    starts after interleaving.

    The layouts are those the decode functions of get_lop3_intrin_group read:

    * ``float16`` targets decode two fields at a time into the two halves of a 32-bit
      register, so fields ``2j`` and ``2j + 1`` of each group of eight must sit ``4 * nbits``
      bits apart: a group of eight fields fills ``nbits`` bytes, field ``j`` of a group at
      bit ``(j % 2) * 4 * nbits + (j // 2) * nbits``. For nbits 4 a group is the whole word
      (even fields in the low half, odd fields in the high half); for nbits 2 and 1 a word
      holds two and four groups. nbits 8 pairs fields across the halves the same way.
    * ``int8`` targets decode four fields at a time into the four bytes of a register, so
      field ``j`` of a word goes to byte ``j % 4`` at bit ``(j // 4) * nbits`` of it; for
      nbits 1 the nibbles are then arranged so that each 16-bit half of the word holds 16
      fields, field ``j`` of a half at bit ``j // 4 + 4 * (2 * (j % 2) + (j % 4) // 2)``.
    """
    if isinstance(nbits, bool) or not isinstance(nbits, int) or nbits not in (1, 2, 4, 8):
        raise ValueError(f"interleave_weight: nbits must be 1, 2, 4 or 8, got {nbits!r}")
    target = str(target_dtype)
    if target not in ("float16", "int8"):
        raise ValueError(f"interleave_weight: target_dtype must be 'float16' or 'int8', got {target_dtype!r}")
    count = 32 // nbits
    pos = []
    for o in range(count):
        if target == "float16":
            if nbits >= 4:
                pos.append((o % 2) * 16 + (o // 2) * nbits)
            else:
                group, j = divmod(o, 8)
                pos.append(group * 8 * nbits + (j % 2) * 4 * nbits + (j // 2) * nbits)
        else:
            if nbits == 1:
                half, j = divmod(o, 16)
                pos.append(half * 16 + j // 4 + 4 * (2 * (j % 2) + (j % 4) // 2))
            else:
                pos.append((o % 4) * 8 + (o // 4) * nbits)
    assert sorted(pos) == [o * nbits for o in range(count)]  # a permutation of the fields
    return pos


def interleave_weight(qweight, nbits=4, target_dtype="float16"):
    """The packed weight ``qweight`` (any integer dtype, last dimension a whole number of
    32-bit words, contiguous) with the ``nbits``-wide fields of each 32-bit word permuted
    into the layout the fast decode of get_lop3_intrin_group reads for ``target_dtype``
    ("float16" or "int8"; see interleave_positions). Returns the words' bytes as int8 (a
    torch tensor for a torch input, else a numpy array), of shape ``qweight``'s with the
    last dimension in bytes.

    Example::

        qweight = torch.randint(0, 127, (10, 16), dtype=torch.int8)
        interleave_weight(qweight, 4, "float16")
    """
    pos = interleave_positions(nbits, target_dtype)
    mask = (1 << nbits) - 1
    if _is_torch(qweight):
        import torch
        if (qweight.shape[-1] * qweight.element_size()) % 4:
            raise ValueError("interleave_weight: the last dimension must hold a whole number of 32-bit words")
        words = qweight.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        out = torch.zeros_like(words)
        for o, p in enumerate(pos):
            out |= ((words >> (o * nbits)) & mask) << p
        # int64 -> int32 keeps the low 32 bits (two's complement wrap).
        out = torch.where(out >= 2 ** 31, out - 2 ** 32, out).to(torch.int32)
        return out.view(torch.int8)
    arr = np.ascontiguousarray(np.asarray(qweight))
    if arr.dtype.kind not in "iu":
        raise TypeError(f"interleave_weight: qweight must hold integers, got dtype {arr.dtype}")
    if (arr.shape[-1] * arr.dtype.itemsize) % 4:
        raise ValueError("interleave_weight: the last dimension must hold a whole number of 32-bit words")
    words = arr.view(np.uint32)
    out = np.zeros_like(words)
    for o, p in enumerate(pos):
        out |= ((words >> np.uint32(o * nbits)) & np.uint32(mask)) << np.uint32(p)
    return out.view(np.int8)


# ----------------------------------------------------------------------------- packing

def general_compress(lowprecision_weight, source_bits=4, storage_dtype=None):
    """Packs the ``source_bits``-wide integers of ``lowprecision_weight`` along its last
    dimension, ``8 // source_bits`` per byte, element ``k`` of a byte at bit
    ``source_bits * k`` (a float16 input is converted to integers first). Each value keeps
    its low ``source_bits`` bits, so negative values are packed in two's complement. The
    bytes are returned as int8 converted to ``storage_dtype`` (torch.int8 / np.int8 by
    default), a torch tensor for a torch input, else a numpy array."""
    if isinstance(source_bits, bool) or not isinstance(source_bits, int) or source_bits not in (1, 2, 4, 8):
        raise ValueError(f"general_compress: source_bits must be 1, 2, 4 or 8, got {source_bits!r}")
    per_byte = 8 // source_bits
    mask = (1 << source_bits) - 1
    if _is_torch(lowprecision_weight):
        import torch
        w = lowprecision_weight
        if w.shape[-1] % per_byte:
            raise ValueError(f"general_compress: the last dimension ({w.shape[-1]}) must be a multiple of "
                             f"{per_byte}")
        w = w.to(torch.int32) & mask
        w = w.reshape(*w.shape[:-1], w.shape[-1] // per_byte, per_byte)
        packed = torch.zeros(w.shape[:-1], dtype=torch.int32, device=w.device)
        for k in range(per_byte):
            packed |= w[..., k] << (source_bits * k)
        packed = torch.where(packed >= 128, packed - 256, packed).to(torch.int8)
        return packed.to(torch.int8 if storage_dtype is None else storage_dtype)
    w = np.asarray(lowprecision_weight)
    if w.shape[-1] % per_byte:
        raise ValueError(f"general_compress: the last dimension ({w.shape[-1]}) must be a multiple of {per_byte}")
    w = w.astype(np.int64) & mask
    w = w.reshape(*w.shape[:-1], w.shape[-1] // per_byte, per_byte)
    packed = np.zeros(w.shape[:-1], dtype=np.int64)
    for k in range(per_byte):
        packed |= w[..., k] << (source_bits * k)
    packed = packed.astype(np.uint8).view(np.int8)
    return packed.astype(np.int8 if storage_dtype is None else storage_dtype)


def gen_quant4(k, n, groupsize=-1):
    """A random float16 weight of shape (k, n) quantized to 4 bits with one scale per
    ``groupsize`` rows (all k rows when -1), as in GPTQ-style tests. Needs torch.

    Returns ``(original_w, linear, s, q)``: the weight; a bias-free ``torch.nn.Linear(k, n)``
    whose weight is the dequantized weight (transposed); the float16 scales, shape
    ``(k // groupsize, n)``; and the quantized values ``q`` (int32, shape (k, n)) with
    ``original_w ≈ q * s``. The scale of a group is its largest magnitude times 2/16, and
    ``q = round(w / s)`` lies in [-8, 8] (only a group's largest positive element can reach
    8)."""
    import torch
    maxq = 2 ** 4
    w = torch.randn((k, n), dtype=torch.half, device="cpu")
    original_w = w.clone()
    if groupsize == -1:
        groupsize = k
    if k % groupsize:
        raise ValueError(f"gen_quant4: k ({k}) must be a multiple of groupsize ({groupsize})")
    grouped = w.reshape(k // groupsize, groupsize, n)
    s = grouped.abs().amax(dim=1, keepdim=True) * (2 / maxq)
    q = torch.round(grouped / s).int() + maxq // 2
    q = torch.clamp(q, 0, maxq)
    ref = ((q - maxq // 2).half() * s).reshape(k, n).contiguous()
    q = q.reshape(k, n).contiguous()
    s = s.reshape(-1, n).contiguous()
    linear = torch.nn.Linear(k, n, bias=False)
    linear.weight.data = ref.t()
    return original_w, linear, s, q - maxq // 2
