"""tilelang.quantize: the expression builders (_tir_*) checked exactly against numpy on
random packed words on every target of the suite (and compiled for sm_90a by NVRTC); the
host helpers (interleave_weight, general_compress, gen_quant4); the decode functions of
get_lop3_intrin_group / get_mxfp_intrin_group run on the cpu target (and, with
TILELANG_TEST_TARGETS=cuda, on the GPU, fast path and plain path) against numpy models of
the plain unpack of the original, un-interleaved weights, and compiled for sm_90a."""
import ml_dtypes
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangTypeError
from tilelang.quantize import (_tir_packed_int_to_int_convert, _tir_packed_to_fp4_to_f16,
                               _tir_packed_to_signed_convert, _tir_packed_to_unsigned_convert,
                               _tir_packed_to_unsigned_convert_with_zeros, _tir_u8_to_f4_to_bf16,
                               _tir_u8_to_f8_e4m3_to_f16, gen_quant4, general_compress,
                               get_lop3_intrin_group, get_mxfp_intrin_group, interleave_weight)
from tilelang.quantize.utils import interleave_positions

SM90 = "cuda -arch=sm_90a"


def nvrtc_compiles(func, arch="sm_90a"):
    from sass import nvrtc_reason
    from tilelang.jit.kernel import _include_dir
    reason = nvrtc_reason()
    if reason:
        pytest.skip(f"NVRTC is not available: {reason}")
    target = f"cuda -arch={arch}"
    source = _C.codegen(_C.lower(func.handle, target), target)
    cubin = _C.nvrtc_compile(source, "quantize.cu", arch, [_include_dir()])
    assert cubin[:4] == b"\x7fELF"
    return source


def fields_of(words, nbit, storage_bits):
    """The nbit-wide fields of each storage word, in order (numpy model of the plain unpack)."""
    u = words.astype(np.int64) & ((1 << storage_bits) - 1)
    per = storage_bits // nbit
    return np.stack([(u >> (nbit * p)) & ((1 << nbit) - 1) for p in range(per)], axis=-1)


# ----------------------------------------------------------------------------- builders

def storage_for(target):
    # webgpu has 32-bit integers only.
    return ["uint32", "int32"] if target == "webgpu" else ["int8", "uint8", "int32", "uint32"]


def int_fields_kernel(storage, nbit, n, out_dtypes):
    stype = "".join(c for c in storage if not c.isdigit())
    sbits = int("".join(c for c in storage if c.isdigit()))
    per = sbits // nbit
    o1, o2, o3 = (out_dtypes + [out_dtypes[0]])[:3]

    @T.prim_func
    def main(A: T.Tensor((n,), storage), Z: T.Tensor((n * per,), "int32"), ZF: T.Tensor((n * per,), "float32"),
             O1: T.Tensor((5, n * per), o1), O2: T.Tensor((5, n * per), o2), O3: T.Tensor((5, n * per), o3)):
        with T.Kernel(T.ceildiv(n * per, 64), threads=64) as bx:
            for i in T.Parallel(64):
                e = bx * 64 + i
                if e < n * per:
                    for O, d in ((O1, o1), (O2, o2), (O3, o3)):
                        O[0, e] = _tir_packed_to_unsigned_convert(stype, sbits)(nbit, A[e // per], e % per, d)
                        O[1, e] = _tir_packed_to_signed_convert(stype, sbits)(nbit, A[e // per], e % per, d)
                        O[2, e] = _tir_packed_int_to_int_convert(stype, sbits)(nbit, A[e // per], e % per, d)
                        O[3, e] = _tir_packed_to_unsigned_convert_with_zeros(stype, sbits)(
                            nbit, A[e // per], e % per, Z[e], dtype=d)
                        O[4, e] = _tir_packed_to_unsigned_convert_with_zeros(stype, sbits)(
                            nbit, A[e // per], e % per, ZF[e], dtype=d)

    return main


def random_words(rng, dtype, n):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, endpoint=True, dtype=np.int64).astype(dtype)


@pytest.mark.parametrize("nbit", [1, 2, 4, 8])
def test_integer_field_builders(target, rng, nbit):
    """unsigned, signed (offset binary), two's complement and zero-point fields of random
    words, for each storage type, into float32, int32 and float16 (not on webgpu)."""
    out_dtypes = ["float32", "int32"] if target == "webgpu" else ["float32", "int32", "float16"]
    for storage in storage_for(target):
        sbits = np.dtype(storage).itemsize * 8
        per = sbits // nbit
        n = 37
        a = random_words(rng, np.dtype(storage), n)
        z = rng.integers(0, 1 << nbit, n * per).astype(np.int32)
        zf = (rng.standard_normal(n * per) * 4).astype(np.float16).astype(np.float32)
        k = tilelang.compile(int_fields_kernel(storage, nbit, n, out_dtypes), out_idx=[-3, -2, -1], target=target)
        f = fields_of(a, nbit, sbits).reshape(-1)
        twos = np.where(f >= 1 << (nbit - 1), f - (1 << nbit), f)
        for out, d in zip(k(a, z, zf), out_dtypes):
            out = np.asarray(out)
            msg = f"{storage} -> {d}"
            np.testing.assert_array_equal(out[0], f.astype(d), err_msg=f"unsigned, {msg}")
            np.testing.assert_array_equal(out[1], (f - (1 << (nbit - 1))).astype(d), err_msg=f"signed, {msg}")
            np.testing.assert_array_equal(out[2], twos.astype(d), err_msg=f"int_to_int, {msg}")
            # The zero point is subtracted in a signed type: fields below it give negatives.
            np.testing.assert_array_equal(out[3], (f - z).astype(d), err_msg=f"with_zeros (int zero), {msg}")
            np.testing.assert_array_equal(out[4], (f.astype(np.float32) - zf).astype(d),
                                          err_msg=f"with_zeros (float zero), {msg}")


FP4_E3M0 = np.array([0.0] + [2.0 ** (e - 7) for e in range(1, 8)])


def test_fp4_and_fp8_builders(target, rng):
    storage = "uint32" if target == "webgpu" else "uint8"
    out = "float32" if target == "webgpu" else "float16"
    sbits = np.dtype(storage).itemsize * 8
    per = sbits // 4
    n = 64

    @T.prim_func
    def main(A: T.Tensor((n,), storage), E: T.Tensor((256,), storage), F: T.Tensor((n * per,), out),
             G: T.Tensor((256,), out)):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                for p in T.serial(per):
                    F[i * per + p] = _tir_packed_to_fp4_to_f16("uint", sbits)(4, A[i], p, out)
            for i in T.Parallel(256):
                G[i] = _tir_u8_to_f8_e4m3_to_f16(8, E[i], out)

    k = tilelang.compile(main, out_idx=[-2, -1], target=target)
    a = random_words(rng, np.dtype(storage), n)
    every_byte = np.arange(256).astype(storage)
    f4, f8 = k(a, every_byte)
    f = fields_of(a, 4, sbits).reshape(-1)
    want = np.where(f & 8, -1.0, 1.0) * FP4_E3M0[f & 7]
    want[(f & 7) == 0] = 0.0
    np.testing.assert_array_equal(f4.astype(np.float64), want)
    e4m3 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    np.testing.assert_array_equal(f8.astype(np.float64), e4m3)  # NaN at 0x7f and 0xff on both sides
    assert np.isnan(f8[0x7F]) and np.isnan(f8[0xFF]) and f8[0x01] == 2.0 ** -9 and f8[0x7E] == 448
    assert np.signbit(f8[0x80]) and f8[0x80] == 0


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def test_fp4_e2m1_to_bf16_builder(target, rng):
    if target == "webgpu":
        pytest.skip("not supported on webgpu: uint8 and bfloat16 values")
    n = 128

    @T.prim_func
    def main(A: T.Tensor((n,), "uint8"), S: T.Tensor((n,), "uint8"), O: T.Tensor((n * 2,), "bfloat16"),
             P: T.Tensor((n * 2,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                for p in T.serial(2):
                    O[i * 2 + p] = _tir_u8_to_f4_to_bf16(4, A[i], p, S[i], "bfloat16")
                    P[i * 2 + p] = _tir_u8_to_f4_to_bf16(4, A[i], p, 0, dtype="float32")

    k = tilelang.compile(main, out_idx=[-2, -1], target=target)
    a = rng.integers(0, 256, n).astype(np.uint8)
    s = rng.integers(0, 140, n).astype(np.uint8)
    s[:4] = [0, 129, 130, 250]  # 2**129 * 6 overflows bfloat16's exponent: clamped to 255, infinity
    o, p = k(a, s)
    codes = np.stack([a & 15, a >> 4], -1).reshape(-1).astype(np.int64)
    np.testing.assert_array_equal(p, E2M1[codes].astype(np.float32))
    with np.errstate(over="ignore"):
        exact = E2M1[codes] * 2.0 ** np.repeat(s, 2).astype(np.float64)
    exp_field = np.where((codes & 7) == 0, 0, np.where((codes & 6) == 0, 126, ((codes >> 1) & 3) + 126))
    clamped = (exp_field + np.repeat(s, 2).astype(np.int64) > 255) & (exp_field > 0)
    want = np.where(clamped, np.where(codes & 8, -np.inf, np.inf), exact)
    want = np.where(clamped & ((codes & 1) == 1) & ((codes & 6) != 0), np.nan, want)
    np.testing.assert_array_equal(o.astype(np.float64), want)


def test_builders_compile_for_cuda():
    n = 64

    @T.prim_func
    def main(A: T.Tensor((n,), "int8"), U: T.Tensor((n,), "uint8"), O: T.Tensor((6, n * 2), "float16"),
             P: T.Tensor((n * 2,), "bfloat16")):
        with T.Kernel(1, threads=128) as _:
            for e in T.Parallel(128):
                O[0, e] = _tir_packed_to_unsigned_convert("int", 8)(4, A[e // 2], e % 2, "float16")
                O[1, e] = _tir_packed_to_signed_convert("int", 8)(4, A[e // 2], e % 2, "float16")
                O[2, e] = _tir_packed_int_to_int_convert("int", 8)(4, A[e // 2], e % 2, "float16")
                O[3, e] = _tir_packed_to_unsigned_convert_with_zeros("int", 8)(4, A[e // 2], e % 2, 3, "float16")
                O[4, e] = _tir_packed_to_fp4_to_f16("uint", 8)(4, U[e // 2], e % 2, "float16")
                O[5, e] = _tir_u8_to_f8_e4m3_to_f16(8, U[e // 2], "float16")
                P[e] = _tir_u8_to_f4_to_bf16(4, U[e // 2], e % 2, U[e // 4], "bfloat16")

    source = nvrtc_compiles(main)
    assert "tl::bit_cast<float>" in source


def test_builders_check_their_arguments():
    def build(call):
        @T.prim_func
        def main(A: T.Tensor((4,), "int8"), O: T.Tensor((4,), "float16")):
            with T.Kernel(1) as _:
                for i in T.serial(4):
                    O[i] = call(A, i)
        return main

    with pytest.raises(TileLangTypeError, match="val has dtype int8, but this converter was made for uint8"):
        build(lambda A, i: _tir_packed_to_unsigned_convert()(4, A[i], 0, "float16"))
    with pytest.raises(TileLangTypeError, match="nbit must be an int in"):
        build(lambda A, i: _tir_packed_to_signed_convert("int", 8)(9, A[i], 0, "float16"))
    with pytest.raises(TileLangTypeError, match="_tir_packed_to_fp4_to_f16: nbit must be 4"):
        build(lambda A, i: _tir_packed_to_fp4_to_f16("int", 8)(2, A[i], 0, "float16"))
    with pytest.raises(TileLangTypeError, match="_tir_u8_to_f8_e4m3_to_f16: nbit must be 8"):
        build(lambda A, i: _tir_u8_to_f8_e4m3_to_f16(4, A[i], "float16"))
    with pytest.raises(TileLangTypeError, match="storage_nbit must be 8, 16, 32 or 64"):
        _tir_packed_to_unsigned_convert("uint", 12)
    with pytest.raises(TileLangTypeError, match="storage_type must be 'uint' or 'int'"):
        _tir_packed_int_to_int_convert("float", 8)


# ----------------------------------------------------------------------------- host helpers

def deinterleave(words_i8, nbits, target_dtype):
    """The inverse of interleave_weight, from interleave_positions."""
    pos = interleave_positions(nbits, target_dtype)
    w = np.ascontiguousarray(words_i8).view(np.uint32)
    out = np.zeros_like(w)
    mask = np.uint32((1 << nbits) - 1)
    for o, p in enumerate(pos):
        out |= ((w >> np.uint32(p)) & mask) << np.uint32(o * nbits)
    return out.view(np.int8)


@pytest.mark.parametrize("target_dtype", ["float16", "int8"])
@pytest.mark.parametrize("nbits", [1, 2, 4, 8])
def test_interleave_weight_round_trip(rng, nbits, target_dtype):
    q = rng.integers(-128, 128, (6, 32)).astype(np.int8)
    qi = interleave_weight(q, nbits, target_dtype)
    assert qi.dtype == np.int8 and qi.shape == q.shape
    np.testing.assert_array_equal(deinterleave(qi, nbits, target_dtype), q)
    # A permutation of each word's fields: the multiset of fields is unchanged.
    np.testing.assert_array_equal(np.sort(fields_of(qi.view(np.uint32), nbits, 32), axis=-1),
                                  np.sort(fields_of(q.view(np.uint32), nbits, 32), axis=-1))
    torch = pytest.importorskip("torch")
    qt = interleave_weight(torch.from_numpy(q), nbits, target_dtype)
    assert qt.dtype == torch.int8
    np.testing.assert_array_equal(qt.numpy(), qi)
    # Other integer views of the same bytes give the same bytes.
    np.testing.assert_array_equal(interleave_weight(q.view(np.int32), nbits, target_dtype), qi)


def test_interleave_weight_layouts():
    # 4-bit fields for float16: even fields to the low half, odd fields to the high half.
    word = np.array([0x76543210], np.uint32)
    assert interleave_weight(word, 4, "float16").view(np.uint32)[0] == 0x75316420
    # for int8: field j to byte j % 4, bit (j // 4) * 4.
    assert interleave_weight(word, 4, "int8").view(np.uint32)[0] == 0x73625140
    assert interleave_positions(2, "float16")[:8] == [0, 8, 2, 10, 4, 12, 6, 14]
    assert interleave_positions(1, "int8")[:16] == [0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15]
    with pytest.raises(ValueError, match="nbits must be 1, 2, 4 or 8, got 3"):
        interleave_weight(word, 3)
    with pytest.raises(ValueError, match="target_dtype must be 'float16' or 'int8'"):
        interleave_weight(word, 4, "bfloat16")
    with pytest.raises(ValueError, match="whole number of 32-bit words"):
        interleave_weight(np.zeros((2, 6), np.int8), 4)


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_general_compress(rng, bits):
    w = rng.integers(0, 1 << bits, (5, 16))
    packed = general_compress(w, bits)
    assert packed.dtype == np.int8 and packed.shape == (5, 16 * bits // 8)
    np.testing.assert_array_equal(fields_of(packed, bits, 8).reshape(5, 16), w)
    # Negative values are packed in two's complement (their low bits).
    np.testing.assert_array_equal(general_compress(w - (1 << bits), bits), packed)
    assert general_compress(w, bits, np.uint8).dtype == np.uint8
    torch = pytest.importorskip("torch")
    pt = general_compress(torch.from_numpy(w), bits)
    assert pt.dtype == torch.int8
    np.testing.assert_array_equal(pt.numpy(), packed)
    np.testing.assert_array_equal(general_compress(torch.from_numpy(w).half(), bits).numpy(), packed)
    assert general_compress(torch.from_numpy(w), bits, torch.uint8).dtype == torch.uint8
    with pytest.raises(ValueError, match="source_bits must be 1, 2, 4 or 8, got 3"):
        general_compress(w, 3)


def test_gen_quant4():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    original, linear, s, q = gen_quant4(64, 32, groupsize=16)
    assert original.shape == (64, 32) and original.dtype == torch.half
    assert s.shape == (4, 32) and s.dtype == torch.half
    assert q.shape == (64, 32) and int(q.min()) >= -8 and int(q.max()) <= 8
    ref = (q.half().reshape(4, 16, 32) * s.reshape(4, 1, 32)).reshape(64, 32)
    torch.testing.assert_close(linear.weight.data.t(), ref)
    assert (ref.float() - original.float()).abs().max() <= s.float().max() / 2 + 1e-3
    _, _, s_all, _ = gen_quant4(64, 32)
    assert s_all.shape == (1, 32)


# ----------------------------------------------------------------------------- lop3 decode functions

@pytest.mark.parametrize("kwargs, name", [
    (dict(out_dtype="float16"), "decode_i4u_to_f16"),
    (dict(out_dtype="float16", source_format="int", source_bit=2), "decode_i2s_to_f16"),
    (dict(out_dtype="float16", with_scaling=True), "decode_i4u_to_f16_scale"),
    (dict(out_dtype="float16", with_scaling=True, storage_scope="warp"), "decode_i4u_to_f16_scale_offset"),
    (dict(out_dtype="float16", storage_scope="warp"), "decode_i4u_to_f16"),
    (dict(out_dtype="float16", source_bit=1, with_scaling=True, with_zeros=True, zeros_mode="rescale"),
     "decode_i1u_to_f16_scale_zeros_rescale"),
    (dict(out_dtype="float16", with_scaling=True, with_zeros=True, zeros_mode="quantized", storage_scope="warp"),
     "decode_i4u_to_f16_scale_zeros_quantized_offset"),
    (dict(out_dtype="int8", source_format="int", source_bit=4), "decode_i4s_to_i8s"),
    (dict(out_dtype="int4", source_bit=2), "decode_i2u_to_i4s"),
    (dict(out_dtype=T.float16, source_format="int32", storage_dtype=T.int32), "decode_i4s_to_f16"),
    (dict(out_dtype="bfloat16", with_scaling=True), "decode_i4u_to_bf16_scale"),
])
def test_lop3_names(kwargs, name):
    group = get_lop3_intrin_group(**kwargs)
    assert set(group) == {"func_name", "c_source"}
    assert group["func_name"] == name
    assert f"void {name}(" in group["c_source"]


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(out_dtype="float32"), ValueError, "out_dtype must be 'float16', 'int8' or 'int4'"),
    (dict(out_dtype="float16", source_bit=3), ValueError, "source_bit must be 1, 2 or 4, got 3"),
    (dict(out_dtype="float16", source_bit=8), ValueError, "source_bit must be 1, 2 or 4, got 8"),
    (dict(out_dtype="float16", source_bit="4"), TypeError, "source_bit must be an int, got str"),
    (dict(out_dtype="float16", source_format="float"), ValueError, "source_format must be 'int' or 'uint'"),
    (dict(out_dtype="float16", storage_dtype="float16"), ValueError, "storage_dtype must be one of"),
    (dict(out_dtype="float16", with_scaling=True, with_zeros=True, source_format="int"), ValueError,
     "with_zeros=True needs source_format 'uint'"),
    (dict(out_dtype="float16", with_zeros=True), ValueError, "with_zeros=True needs with_scaling=True"),
    (dict(out_dtype="float16", with_scaling=True, with_zeros=True, zeros_mode="shift"), ValueError,
     "zeros_mode must be 'original', 'rescale' or 'quantized'"),
    (dict(out_dtype="float16", storage_scope="shared"), ValueError, "storage_scope must be 'local' or 'warp'"),
    (dict(out_dtype="int8", with_scaling=True), ValueError, "need a float out_dtype"),
    (dict(out_dtype="int4", source_bit=4), ValueError, "out_dtype 'int4' takes source_bit 2"),
    (dict(out_dtype="float16", with_scaling=1), TypeError, "with_scaling must be a bool"),
])
def test_lop3_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        get_lop3_intrin_group(**kwargs)


# The float configurations checked numerically: (bits, signed, scale, zeros mode, offset, N).
FLOAT_CASES = [
    (b, s, sc, z, off, n)
    for b in (1, 2, 4)
    for s, sc, z, off in [(False, False, None, False), (True, False, None, False), (False, True, None, False),
                          (True, True, None, False), (True, True, None, True), (False, True, "original", False),
                          (False, True, "original", True), (False, True, "rescale", False),
                          (False, True, "rescale", True), (False, True, "quantized", False),
                          (False, True, "quantized", True)]
    for n in ((8, 16) if not sc else (8,))
] + [(4, False, True, "original", False, 4), (2, True, False, None, False, 6)]
INT_CASES = [("int8", b, s) for b in (1, 2, 4) for s in (False, True)] + [("int4", 2, s) for s in (False, True)]
NB = 16  # packed bytes per case


def float_group(case, out="float16"):
    bits, signed, scale, zeros, offset, _ = case
    return get_lop3_intrin_group(out, "int" if signed else "uint", bits, "int8", with_scaling=scale,
                                 with_zeros=zeros is not None, zeros_mode=zeros or "original",
                                 storage_scope="warp" if offset else "local")


def decode_kernel(out="float16", portable=False):
    """One kernel calling every case's function: case c decodes B[c] (NB bytes, interleaved)
    into D[c] with scales S[c] and zeros Z[c] (two each: the offset forms take the second
    for the second half) and packed zeros Q[c]; int cases write I[c]."""
    groups = [float_group(c, out) for c in FLOAT_CASES]
    igroups = [get_lop3_intrin_group(o, "int" if s else "uint", b) for o, b, s in INT_CASES]
    nf, ni = len(FLOAT_CASES), len(INT_CASES)

    @T.prim_func
    def main(B: T.Tensor((nf, NB), "int8"), S: T.Tensor((nf, 2), out), Z: T.Tensor((nf, 2), out),
             Q: T.Tensor((nf, 2), "int8"), BI: T.Tensor((ni, NB), "int8"), D: T.Tensor((nf, 16), out),
             I: T.Tensor((ni, 16), "int8")):
        with T.Kernel(1, threads=1) as _:
            if portable:
                T.import_source("#define TLQ_PORTABLE_DECODE 1\n")
            for g in groups + igroups:
                T.import_source(g["c_source"])
            Bl = T.alloc_local((NB,), "int8")
            Dl = T.alloc_local((16,), out)
            Il = T.alloc_local((16,), "int8")
            for c, (case, g) in enumerate(zip(FLOAT_CASES, groups)):
                n = case[-1]
                for v in T.serial(NB):
                    Bl[v] = B[c, v]
                args = [T.address_of(Bl[0]), T.address_of(Dl[0])]
                if case[2]:
                    args.append(T.address_of(S[c, 0]))
                if case[3] == "quantized" and case[4]:
                    args += [T.address_of(Q[c, 0]), 1, 1, 1]
                elif case[3]:
                    args.append(T.address_of(Z[c, 0]))
                if case[4] and case[3] != "quantized":
                    args.append(1)
                T.call_extern("handle", g["func_name"], *args, n)
                for v in T.serial(n):
                    D[c, v] = Dl[v]
            for c, g in enumerate(igroups):
                for v in T.serial(NB):
                    Bl[v] = BI[c, v]
                T.call_extern("handle", g["func_name"], T.address_of(Bl[0]), T.address_of(Il[0]))
                for v in T.serial(16):
                    I[c, v] = Il[v]

    return main


def pack_i2_for_int4(fields):
    """16 2-bit fields per 32-bit word, field j at bit 4 * (j % 8) + 2 * (j // 8)."""
    words = np.zeros(len(fields) // 16, np.uint32)
    for j in range(len(fields)):
        g, k = divmod(j, 16)
        words[g] |= np.uint32(int(fields[j]) << (4 * (k % 8) + 2 * (k // 8)))
    return words.view(np.int8)


def decode_inputs(rng, out="float16"):
    nf, ni = len(FLOAT_CASES), len(INT_CASES)
    np_out = np.float16 if out == "float16" else ml_dtypes.bfloat16
    raw = rng.integers(-128, 128, (nf, NB)).astype(np.int8)
    B = np.stack([interleave_weight(raw[c], case[0], "float16") for c, case in enumerate(FLOAT_CASES)])
    S = (rng.uniform(0.05, 2.0, (nf, 2)) * rng.choice([-1, 1], (nf, 2))).astype(np_out)
    Z = rng.uniform(-3, 9, (nf, 2)).astype(np_out)
    for c, case in enumerate(FLOAT_CASES):
        if case[3] == "quantized":
            Z[c] = rng.integers(0, 1 << case[0], 2)  # integer zero points
    Q = rng.integers(-128, 128, (nf, 2)).astype(np.int8)
    rawi = rng.integers(-128, 128, (ni, NB)).astype(np.int8)
    BI = []
    for c, (o, b, s) in enumerate(INT_CASES):
        if o == "int8":
            BI.append(interleave_weight(rawi[c], b, "int8"))
        else:
            BI.append(np.concatenate([pack_i2_for_int4(fields_of(rawi[c, :4], 2, 8).reshape(-1)), rawi[c, 4:]]))
    return raw, B, S, Z, Q, rawi, np.stack(BI)


def float_model(case, raw, S, Z, Q, np_out):
    """The decode of the first n fields of raw (plain order) as the docstrings define it."""
    bits, signed, scale, zeros, offset, n = case
    f = fields_of(raw, bits, 8).reshape(-1)[:n].astype(np.float64)
    if signed:
        f = 2 * f - 1 if bits == 1 else f - (1 << (bits - 1))
    if not scale:
        return f.astype(np_out)
    half = np.arange(n) >= n // 2
    s = np.where(half & offset, S[1], S[0]).astype(np.float64)
    if zeros == "quantized" and offset:
        z = np.where(half, (Q[1].astype(np.uint8) >> bits) & ((1 << bits) - 1),
                     (Q[0].astype(np.uint8) >> bits) & ((1 << bits) - 1)).astype(np.float64)
    else:
        z = np.where(half & offset, Z[1], Z[0]).astype(np.float64)
    if zeros == "original":
        r = (f - z).astype(np_out).astype(np.float64) * s
    elif zeros == "rescale":
        r = f * s - z
    elif zeros == "quantized":
        r = (f - z) * s
    else:
        r = f * s
    return r.astype(np_out)


def int_model(case, raw):
    o, bits, signed = case
    f = fields_of(raw, bits, 8).reshape(-1)[:16]
    if o == "int8":
        if signed:
            f = 2 * f - 1 if bits == 1 else f - (1 << (bits - 1))
        return f.astype(np.int8)
    if signed:
        f = np.where(f & 2, f | 0xC, f)
    return (f[0::2] | (f[1::2] << 4)).astype(np.uint8).view(np.int8)


def check_decodes(kernel, rng, out="float16"):
    np_out = np.float16 if out == "float16" else ml_dtypes.bfloat16
    raw, B, S, Z, Q, rawi, BI = decode_inputs(rng, out)
    D, I = (np.asarray(x.cpu() if hasattr(x, "cpu") else x) for x in kernel(B, S, Z, Q, BI))
    for c, case in enumerate(FLOAT_CASES):
        want = float_model(case, raw[c], S[c], Z[c], Q[c], np_out)
        np.testing.assert_array_equal(D[c, :case[-1]].astype(np.float64), want.astype(np.float64),
                                      err_msg=f"{float_group(case, out)['func_name']} {case}")
    for c, case in enumerate(INT_CASES):
        want = int_model(case, rawi[c])
        got = I[c] if case[0] == "int8" else I[c, :8]
        np.testing.assert_array_equal(got, want, err_msg=str(case))


def test_lop3_decodes_on_cpu(rng):
    """The C++ source on the cpu target (its plain decode) equals the plain unpack of the
    original weights, for every form."""
    check_decodes(tilelang.compile(decode_kernel(), out_idx=[-2, -1], target="cpu"), rng)


def test_lop3_bfloat16_decodes_on_cpu(rng):
    check_decodes(tilelang.compile(decode_kernel("bfloat16"), out_idx=[-2, -1], target="cpu"), rng, "bfloat16")


def test_lop3_source_compiles_for_sm90_with_the_fast_path():
    source = nvrtc_compiles(decode_kernel())
    assert "lop3.b32" in source and "fma.rn.f16x2" in source
    nvrtc_compiles(decode_kernel("bfloat16"), arch="sm_80")
    from sass import sass_of
    sass, _, _ = sass_of(decode_kernel())
    assert "LOP3" in sass and "HFMA2" in sass  # the f16x2 arithmetic of the fast path


def test_decode_sources_compile_for_hip():
    """The same source through hipcc (gfx90a): the plain decode, no PTX."""
    from tilelang.jit.hip import hipcc_compile, hipcc_path
    from tilelang.jit.kernel import _include_dir
    if hipcc_path() is None:
        pytest.skip("hipcc is not installed")
    for func in (decode_kernel(), mxfp_kernel("bfloat16")):
        source = _C.codegen(_C.lower(func.handle, "hip -arch=gfx90a"), "hip -arch=gfx90a")
        assert "lop3" in source  # present in the text, compiled out for HIP
        assert hipcc_compile(source, "gfx90a", _include_dir(), assembly=True)


@pytest.mark.gpu
@pytest.mark.parametrize("portable", [False, True], ids=["fast", "plain"])
def test_lop3_decodes_on_gpu(rng, portable):
    from conftest import selected_targets, target_unavailable_reason
    if "cuda" not in selected_targets() or target_unavailable_reason("cuda"):
        pytest.skip("the cuda target is not selected or has no GPU (TILELANG_TEST_TARGETS=cuda)")
    check_decodes(tilelang.compile(decode_kernel(portable=portable), out_idx=[-2, -1], target="cuda"), rng)
    check_decodes(tilelang.compile(decode_kernel("bfloat16", portable=portable), out_idx=[-2, -1], target="cuda"),
                  rng, "bfloat16")


def test_lop3_decode_matches_the_dsl_unpack_in_a_gemv(rng):
    """The upstream example's two paths agree: the imported decode of interleaved weights
    and _tir_packed_to_unsigned_convert on the original ones, in a small GEMV."""
    N, K = 8, 64
    group = get_lop3_intrin_group("float16", "uint", 4, "int8")

    @T.prim_func
    def gemv(A: T.Tensor((K,), "float16"), B: T.Tensor((N, K // 2), "int8"), BI: T.Tensor((N, K // 2), "int8"),
             C: T.Tensor((2, N), "float32")):
        with T.Kernel(N, threads=1) as n:
            T.import_source(group["c_source"])
            Bq = T.alloc_local((4,), "int8")
            Bd = T.alloc_local((8,), "float16")
            acc = T.alloc_local((2,), "float32")
            acc[0] = 0.0
            acc[1] = 0.0
            for ko in T.serial(K // 8):
                for v in T.serial(4):
                    Bq[v] = BI[n, ko * 4 + v]
                T.call_extern("handle", group["func_name"], T.address_of(Bq[0]), T.address_of(Bd[0]))
                for v in T.serial(8):
                    acc[0] += A[ko * 8 + v].astype("float32") * Bd[v].astype("float32")
                    plain = _tir_packed_to_unsigned_convert("int", 8)(4, B[n, ko * 4 + v // 2], v % 2, "float16")
                    acc[1] += A[ko * 8 + v].astype("float32") * plain.astype("float32")
            C[0, n] = acc[0]
            C[1, n] = acc[1]

    k = tilelang.compile(gemv, out_idx=[-1], target="cpu")
    a = rng.standard_normal(K).astype(np.float16)
    b = rng.integers(-128, 128, (N, K // 2)).astype(np.int8)
    c = k(a, b, interleave_weight(b, 4, "float16"))
    want = fields_of(b, 4, 8).reshape(N, K).astype(np.float32) @ a.astype(np.float32)
    np.testing.assert_array_equal(c[0], c[1])
    np.testing.assert_allclose(c[0], want, rtol=1e-5, atol=1e-4)


# ----------------------------------------------------------------------------- mxfp decode functions

def twiddled_model(raw):
    """The examples' reference for the twiddled layout, by masks and a multiplication by
    2**126 in bfloat16 (another method than the decode's)."""
    b = raw.astype(np.uint8).astype(np.int64).reshape(-1, 2)
    v = (b[:, 0] << 8) | b[:, 1]
    mask = 0b1000000111000000
    res = [v & mask, (v << 3) & mask, (v << 6) & mask,
           ((v << 1) & 0x8000) | ((v >> 3) & 0x0180) | ((v >> 7) & 0x0040)]
    bits = np.stack(res, -1).reshape(-1).astype(np.uint16)
    return bits.view(ml_dtypes.bfloat16).astype(np.float64) * 2.0 ** 126


def plain_fp4_model(raw):
    g = raw.astype(np.uint8).reshape(-1, 4)
    return np.concatenate([E2M1[g & 15], E2M1[g >> 4]], axis=1).reshape(-1)


def mxfp_kernel(out):
    groups = [get_mxfp_intrin_group(out, use_twiddling=t) for t in (True, False)]

    @T.prim_func
    def main(B: T.Tensor((32,), "uint8"), D: T.Tensor((2, 64), out)):
        with T.Kernel(1, threads=1) as _:
            for g in groups:
                T.import_source(g["c_source"])
            Bl = T.alloc_local((32,), "uint8")
            Dl = T.alloc_local((64,), out)
            for v in T.serial(32):
                Bl[v] = B[v]
            for i, g in enumerate(groups):
                # N groups of 4 bytes: once with all 8, once 1 group at a time (the examples' call).
                if i == 0:
                    T.call_extern("handle", g["func_name"], T.address_of(Bl[0]), T.address_of(Dl[0]), 8)
                else:
                    for j in T.serial(8):
                        T.call_extern("handle", g["func_name"], T.address_of(Bl[j * 4]), T.address_of(Dl[j * 8]), 1)
                for v in T.serial(64):
                    D[i, v] = Dl[v]

    return main


@pytest.mark.parametrize("out", ["bfloat16", "float16"])
def test_mxfp_decodes_on_cpu(rng, out):
    k = tilelang.compile(mxfp_kernel(out), out_idx=[-1], target="cpu")
    raw = rng.integers(0, 256, 32).astype(np.uint8)
    raw[:4] = [0x00, 0x00, 0xFF, 0xFF]
    d = k(raw).astype(np.float64)
    np.testing.assert_array_equal(d[0], twiddled_model(raw))
    np.testing.assert_array_equal(d[1], plain_fp4_model(raw))


def test_mxfp_source_compiles_for_sm90():
    for out in ("bfloat16", "float16"):
        nvrtc_compiles(mxfp_kernel(out))


@pytest.mark.gpu
def test_mxfp_decodes_on_gpu(rng):
    from conftest import selected_targets, target_unavailable_reason
    if "cuda" not in selected_targets() or target_unavailable_reason("cuda"):
        pytest.skip("the cuda target is not selected or has no GPU (TILELANG_TEST_TARGETS=cuda)")
    raw = rng.integers(0, 256, 32).astype(np.uint8)
    for out in ("bfloat16", "float16"):
        d = tilelang.compile(mxfp_kernel(out), out_idx=[-1], target="cuda")(raw)
        d = np.asarray(d.cpu() if hasattr(d, "cpu") else d).astype(np.float64)
        np.testing.assert_array_equal(d[0], twiddled_model(raw))
        np.testing.assert_array_equal(d[1], plain_fp4_model(raw))


def test_mxfp_names_and_bad_arguments():
    g = get_mxfp_intrin_group(out_dtype=T.bfloat16, source_format="uint", source_bit=4, storage_dtype=T.uint8,
                              use_twiddling=True)
    assert g["func_name"] == "decode_fp4_to_bf16_twiddling" and set(g) == {"func_name", "c_source"}
    assert get_mxfp_intrin_group("float16")["func_name"] == "decode_fp4_to_f16"
    with pytest.raises(ValueError, match="source_bit must be 4"):
        get_mxfp_intrin_group(source_bit=8)
    with pytest.raises(ValueError, match="out_dtype must be 'bfloat16' or 'float16'"):
        get_mxfp_intrin_group("float32")
    with pytest.raises(ValueError, match="storage_dtype must be 'int32', 'int8' or 'uint8'"):
        get_mxfp_intrin_group(storage_dtype="int16")
    with pytest.raises(TypeError, match="use_twiddling must be a bool"):
        get_mxfp_intrin_group(use_twiddling="yes")
