"""Expression builders for dequantization inside a kernel.

Each builder takes the packed storage element (a buffer load such as ``B_local[v // 2]``), the
index of the field inside it and the destination dtype, and returns a kernel expression.
The factories ``_tir_packed_to_*(storage_type, storage_nbit)`` fix the storage dtype
(``storage_type + str(storage_nbit)``, "uint8" by default) and return the converter
``f(nbit, val, pos, dtype)``::

    convert = _tir_packed_to_unsigned_convert("int", 8)
    B_dequant[v] = convert(4, B_local[v // 2], v % 2, dtype="float16")

Field ``pos`` of width ``nbit`` is bits ``[pos * nbit, (pos + 1) * nbit)`` of ``val``.

How they are built: the storage value is widened to uint32 (uint64 for 64-bit storage)
before the field is shifted out, so that a signed storage type (int8) never smears its sign
into the field and every target sees plain 32-bit unsigned shifts and masks. Float results
are computed in float32 exactly (a small integer times a power of two; for bfloat16 with
a block scale, a float32 bit pattern reinterpreted) and then converted to the requested
dtype; every value these formats hold is exact in float32 and in the destination, so the
result equals a direct float16 / bfloat16 bit assembly, and no 16-bit integer arithmetic is
needed (the webgpu target has none).
"""
from __future__ import annotations

from .. import _C
from ..dtypes import canonical
from ..errors import TileLangTypeError
from ..ir import is_expr
from ..parser import builder as _builder

__all__ = [
    "_tir_packed_to_unsigned_convert",
    "_tir_packed_to_signed_convert",
    "_tir_packed_to_unsigned_convert_with_zeros",
    "_tir_packed_int_to_int_convert",
    "_tir_packed_to_fp4_to_f16",
    "_tir_u8_to_f8_e4m3_to_f16",
    "_tir_u8_to_f4_to_bf16",
]


# ----------------------------------------------------------------------------- helpers

def _fail(message, hint=None):
    return _builder.error(TileLangTypeError, message, hint)


def _u(value, dtype="uint32"):
    return _C.const(value, dtype)


def _as_expr(x, what, dtype="int32"):
    """A kernel value, or a Python int made a constant of dtype."""
    if is_expr(x):
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        raise _fail(f"{what} must be a kernel integer value or a Python int, got {type(x).__name__}")
    return _C.const(x, dtype)


def _storage_dtype(storage_type, storage_nbit):
    if storage_type not in ("uint", "int"):
        raise _fail(f"storage_type must be 'uint' or 'int', got {storage_type!r}")
    if isinstance(storage_nbit, bool) or not isinstance(storage_nbit, int) or storage_nbit not in (8, 16, 32, 64):
        raise _fail(f"storage_nbit must be 8, 16, 32 or 64, got {storage_nbit!r}")
    return f"{storage_type}{storage_nbit}"


def _check_nbit(nbit, storage_bits, name="nbit"):
    if isinstance(nbit, bool) or not isinstance(nbit, int) or not 1 <= nbit <= storage_bits:
        raise _fail(f"{name} must be an int in [1, {storage_bits}] (the field width in bits), got {nbit!r}")


def _check_storage(val, storage_dtype, who):
    if not is_expr(val):
        raise _fail(f"{who}: val must be a kernel value of dtype {storage_dtype} (a buffer element), "
                    f"got {type(val).__name__}")
    if str(val.dtype) != storage_dtype:
        raise _fail(f"{who}: val has dtype {val.dtype}, but this converter was made for {storage_dtype} storage",
                    f"pass storage_type/storage_nbit matching the buffer ({val.dtype})")


def _wide(dtype_bits):
    return "uint64" if dtype_bits > 32 else "uint32"


def _field(val, pos, nbit, bits):
    """Field `pos` of width nbit of val, as an unsigned value of 32 (or 64) bits."""
    wide = _wide(bits)
    v = _C.cast(wide, val) if str(val.dtype) != wide else val
    pos = _as_expr(pos, "pos")
    shift = _C.cast(wide, pos) * _u(nbit, wide)
    return (v >> shift) & _u((1 << nbit) - 1, wide)


def _int_bits(dtype):
    d = canonical(dtype)
    for p in ("uint", "int"):
        if d.startswith(p) and d[len(p):].isdigit():
            return int(d[len(p):])
    return None


def _is_float(dtype):
    d = canonical(dtype)
    return d.startswith("float") or d.startswith("bfloat")


def _dtype(dtype, who):
    try:
        return canonical(dtype)
    except Exception:
        raise _fail(f"{who}: {dtype!r} is not a dtype") from None


def _f32_from_bits(bits_u32):
    from ..language.extern import reinterpret
    return reinterpret(bits_u32, "float32")


def _u32_from_f32(x):
    from ..language.extern import reinterpret
    return reinterpret(x, "uint32")


def _finish_float(x_f32, dtype):
    return x_f32 if dtype == "float32" else _C.cast(dtype, x_f32)


# ----------------------------------------------------------------------------- integer fields

def _tir_packed_to_unsigned_convert(storage_type="uint", storage_nbit=8):
    """Converter ``f(nbit, val, pos, dtype)``: the unsigned nbit-wide field ``pos`` of the
    packed value ``val`` (of dtype ``storage_type + str(storage_nbit)``), converted to
    dtype."""
    storage = _storage_dtype(storage_type, storage_nbit)

    def f_convert(nbit, val, pos, dtype):
        _check_storage(val, storage, "_tir_packed_to_unsigned_convert")
        _check_nbit(nbit, storage_nbit)
        return _C.cast(_dtype(dtype, "_tir_packed_to_unsigned_convert"), _field(val, pos, nbit, storage_nbit))

    return f_convert


def _tir_packed_to_signed_convert(storage_type="uint", storage_nbit=8):
    """Converter ``f(nbit, val, pos, dtype)``: field ``pos`` read as an offset-binary signed
    value, ``field - 2**(nbit - 1)`` (so 4-bit fields give -8..7), converted to dtype."""
    storage = _storage_dtype(storage_type, storage_nbit)

    def f_convert(nbit, val, pos, dtype):
        _check_storage(val, storage, "_tir_packed_to_signed_convert")
        _check_nbit(nbit, min(storage_nbit, 31))
        dtype = _dtype(dtype, "_tir_packed_to_signed_convert")
        field = _C.cast("int32", _field(val, pos, nbit, storage_nbit))
        # The subtraction happens in int32 so that it never wraps before the conversion.
        return _C.cast(dtype, field - _C.const(1 << (nbit - 1), "int32"))

    return f_convert


def _tir_packed_to_unsigned_convert_with_zeros(storage_type="uint", storage_nbit=8):
    """Converter ``f(nbit, val, pos, zero, dtype)``: ``field - zero`` converted to dtype,
    with the unsigned field ``pos`` of ``val`` and a zero point ``zero`` (a kernel value or a
    Python number). The difference is taken in a signed type (float32 when zero or dtype is
    a float, else int32), so a field below its zero point gives a negative value instead of
    wrapping around in the unsigned storage type."""
    storage = _storage_dtype(storage_type, storage_nbit)

    def f_convert(nbit, val, pos, zero, dtype):
        _check_storage(val, storage, "_tir_packed_to_unsigned_convert_with_zeros")
        _check_nbit(nbit, min(storage_nbit, 31))
        dtype = _dtype(dtype, "_tir_packed_to_unsigned_convert_with_zeros")
        field = _field(val, pos, nbit, storage_nbit)
        if is_expr(zero):
            zero_float = _is_float(zero.dtype)
        elif isinstance(zero, (int, float)) and not isinstance(zero, bool):
            zero_float = isinstance(zero, float)
        else:
            raise _fail(f"_tir_packed_to_unsigned_convert_with_zeros: zero must be a kernel value or a number, "
                        f"got {type(zero).__name__}")
        domain = "float32" if zero_float or _is_float(dtype) else "int32"
        z = _C.cast(domain, zero) if is_expr(zero) else _C.const(zero, domain)
        return _C.cast(dtype, _C.cast(domain, field) - z)

    return f_convert


def _tir_packed_int_to_int_convert(storage_type="uint", storage_nbit=8):
    """Converter ``f(nbit, val, pos, dtype)``: field ``pos`` read as a two's-complement
    nbit-wide integer (4-bit 0b1111 is -1), sign-extended and converted to dtype."""
    storage = _storage_dtype(storage_type, storage_nbit)

    def f_convert(nbit, val, pos, dtype):
        _check_storage(val, storage, "_tir_packed_int_to_int_convert")
        _check_nbit(nbit, min(storage_nbit, 31))
        dtype = _dtype(dtype, "_tir_packed_int_to_int_convert")
        field = _C.cast("int32", _field(val, pos, nbit, storage_nbit))
        # Sign extension by arithmetic, (f ^ m) - m with m the sign bit: no shift into the
        # sign bit of int32 (undefined in C before C++20).
        m = _C.const(1 << (nbit - 1), "int32")
        return _C.cast(dtype, (field ^ m) - m)

    return f_convert


# ----------------------------------------------------------------------------- small floats

def _tir_packed_to_fp4_to_f16(storage_type="uint", storage_nbit=8):
    """Converter ``f(nbit, val, pos, dtype)`` for the 4-bit float of sign bit 3 and exponent
    bits 0-2 with no mantissa: field ``s eee`` is ``(-1)**s * 2**(eee - 7)``, and 0 when
    ``eee`` is 0 (either sign). The value is a float16 (dtype float16, the only dtype
    upstream produces; another float dtype gets the same value converted). nbit must be 4."""
    storage = _storage_dtype(storage_type, storage_nbit)

    def f_convert(nbit, val, pos, dtype="float16"):
        _check_storage(val, storage, "_tir_packed_to_fp4_to_f16")
        if nbit != 4:
            raise _fail(f"_tir_packed_to_fp4_to_f16: nbit must be 4, got {nbit!r}")
        dtype = _dtype(dtype, "_tir_packed_to_fp4_to_f16")
        f4 = _field(val, pos, 4, storage_nbit)
        e = f4 & _u(7)
        # 2**(e - 7) = (1 << e) * 2**-7, exact in float32; the sign goes into the factor.
        factor = _C.select((f4 >> _u(3)) == _u(1), _C.const(-2.0 ** -7, "float32"), _C.const(2.0 ** -7, "float32"))
        value = _C.cast("float32", _u(1) << e) * factor
        return _finish_float(_C.select(e == _u(0), _C.const(0.0, "float32"), value), dtype)

    return f_convert


def _tir_u8_to_f8_e4m3_to_f16(nbit, val, dtype="float16"):
    """The float8 E4M3 ("fn": bias 7, no infinities, 0x7f / 0xff NaN) value of the byte
    ``val`` (uint8 or int8; its low 8 bits are used) as a float16 (or another float dtype):
    exact, subnormals (``m * 2**-9``) included. nbit must be 8."""
    if nbit != 8:
        raise _fail(f"_tir_u8_to_f8_e4m3_to_f16: nbit must be 8, got {nbit!r}")
    if not is_expr(val) or _int_bits(val.dtype) is None:
        raise _fail("_tir_u8_to_f8_e4m3_to_f16: val must be an integer kernel value holding the byte "
                    f"(uint8), got {getattr(val, 'dtype', type(val).__name__)}")
    dtype = _dtype(dtype, "_tir_u8_to_f8_e4m3_to_f16")
    b = _C.cast("uint32", val) & _u(0xFF)
    e = (b >> _u(3)) & _u(15)
    m = b & _u(7)
    # Normal (1 + m/8) * 2**(e - 7) = (8 + m) << e times 2**-10; subnormal m/8 * 2**-6 =
    # 2m times 2**-10. The integers stay below 2**19, so the float32 values are exact; the
    # sign goes into the factor (so 0x80 is -0.0).
    units = _C.select(e == _u(0), m << _u(1), (m | _u(8)) << e)
    factor = _C.select((b >> _u(7)) == _u(1), _C.const(-2.0 ** -10, "float32"), _C.const(2.0 ** -10, "float32"))
    value = _C.cast("float32", units) * factor
    value = _C.select((b & _u(0x7F)) == _u(0x7F), _C.const(float("nan"), "float32"), value)
    return _finish_float(value, dtype)


def _tir_u8_to_f4_to_bf16(nbit, val, pos, scale, dtype="bfloat16"):
    """The FP4 E2M1 field ``pos`` (sign bit 3, exponent bits 1-2, mantissa bit 0) of the
    uint8 ``val``, with its exponent raised by ``scale`` (an MX block scale: the value is
    multiplied by ``2**scale``), as a bfloat16 (or another float dtype).

    The E2M1 values are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; zero stays zero
    whatever the scale, and a scaled biased exponent above 255 is clamped to 255 (infinity,
    NaN for a mantissa bit), as the examples' reference decode does. nbit must be 4."""
    if nbit != 4:
        raise _fail(f"_tir_u8_to_f4_to_bf16: nbit must be 4, got {nbit!r}")
    if not is_expr(val) or str(val.dtype) not in ("uint8", "int8"):
        raise _fail("_tir_u8_to_f4_to_bf16: val must be a uint8 kernel value, got "
                    f"{getattr(val, 'dtype', type(val).__name__)}")
    dtype = _dtype(dtype, "_tir_u8_to_f4_to_bf16")
    from ..language.math import min as _min
    f4 = _field(val, pos, 4, 8)
    s = f4 >> _u(3)
    mag = f4 & _u(7)  # exponent and mantissa bits, e << 1 | m
    # Biased bfloat16 exponent: e + 126 for a normal code, 126 for the subnormal code 0b001
    # (0.5, mantissa dropped) and 0 for zero; only a non-zero value takes the scale.
    base = _C.select(mag < _u(2), _u(126), (mag >> _u(1)) + _u(126))
    sc = _C.cast("uint32", _as_expr(scale, "scale", "uint32"))
    exp = _C.select(mag == _u(0), _u(0), _min(base + sc, _u(255)))
    mant = _C.select(mag < _u(2), _u(0), mag & _u(1))
    bits16 = (s << _u(15)) | (exp << _u(7)) | (mant << _u(6))
    # bfloat16 is the top half of a float32.
    return _finish_float(_f32_from_bits(bits16 << _u(16)), dtype)
