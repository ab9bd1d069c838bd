"""get_lop3_intrin_group: the source and name of a device function that decodes packed
low-bit integer weights (in the layout interleave_weight produces) into float16 (or int8 /
int4) values, for T.import_source and T.call_extern.

The functions and their arguments (T1, T2, T3, T4 deduced from the pointers passed):

    decode_i{b}{u|s}_to_f16(T1* B, T2* D, int N = 8)
    decode_i{b}{u|s}_to_f16_scale(T1* B, T2* D, T3* scale, int N = 8)
    decode_i{b}{u|s}_to_f16_scale_offset(T1* B, T2* D, T3* scale, int offset = 0, int N = 8)
    decode_i{b}u_to_f16_scale_zeros_{original|rescale|quantized}(T1* B, T2* D, T3* scale, T4* zeros, int N = 8)
    decode_i{b}u_to_f16_scale_zeros_{original|rescale}_offset(T1* B, T2* D, T3* scale, T4* zeros,
                                                                int offset = 0, int N = 8)
    decode_i{b}u_to_f16_scale_zeros_quantized_offset(T1* B, T2* D, T3* scale, T4* qzeros,
        int scale_offset = 0, int zero_offset = 0, int group_offset = 0, int N = 8)
    decode_i{b}{u|s}_to_i8s(T1* B, T2* D, int N = 16)
    decode_i2{u|s}_to_i4s(T1* B, T2* D, int N = 16)

B points at the packed fields, D at the N outputs. Field values: unsigned, or signed in
offset binary (``v - 2**(b-1)``; 1-bit fields are -1 / +1, ``2v - 1``); for int4 outputs a
signed 2-bit field is two's complement instead. Scale and zeros (one value each, or for
the ``_offset`` forms the value at the pointer for the first N / 2 outputs and the one
``offset`` elements further for the rest):

* scale only: ``v * scale``
* ``original``: ``(v - zero) * scale``
* ``rescale``: ``v * scale - zero``
* ``quantized``: ``(v - zero) * scale`` with an integer zero point (the value at ``zeros``;
  for the ``_offset`` form the b-bit field ``group_offset`` of ``qzeros[0]`` /
  ``qzeros[zero_offset]``)

rounded to float16 as the same steps in float16 arithmetic would be (``original`` rounds
``v - zero`` first). The N fields are read from groups of 8 (float16) or 16 / 8 (int8)
fields laid out as interleave_weight(..., "float16" / "int8") leaves them; see
tilelang.quantize.utils.interleave_positions.

The source is plain C++ with a fast path for NVIDIA GPUs (sm_53+) and float16 outputs
(lop3 and f16x2 arithmetic, inline PTX) that gives the same results; elsewhere (another
GPU, the cpu target, another output type, N not a multiple of 8) each output is computed
by the plain decode. "bfloat16" outputs (``..._to_bf16...``, an addition to upstream's
float16 / int8 / int4) always take the plain decode.
"""
from __future__ import annotations

from ._decode_source import CORE

__all__ = ["get_lop3_intrin_group"]

_OUT = {"float16": "f16", "bfloat16": "bf16", "int8": "i8s", "int4": "i4s"}
_ZEROS = {"original": "ZEROS_ORIGINAL", "rescale": "ZEROS_RESCALE", "quantized": "ZEROS_QUANTIZED"}
_STORAGE = ("int8", "uint8", "int16", "uint16", "int32", "uint32")


def _dtype_text(x, what):
    from ..dtypes import canonical
    try:
        return canonical(x)
    except Exception:
        raise ValueError(f"get_lop3_intrin_group: {what} must be a dtype, got {x!r}") from None


def _source_format(x):
    s = str(x)
    # Upstream's T.int / T.uint are the int32 / uint32 dtypes.
    s = {"int32": "int", "uint32": "uint"}.get(s, s)
    if s not in ("int", "uint"):
        raise ValueError(f"get_lop3_intrin_group: source_format must be 'int' or 'uint', got {x!r}")
    return s


def _check_bool(value, name):
    if not isinstance(value, bool):
        raise TypeError(f"get_lop3_intrin_group: {name} must be a bool, got {type(value).__name__}")


def get_lop3_intrin_group(out_dtype, source_format="uint", source_bit=4, storage_dtype="int8", with_scaling=False,
                          with_zeros=False, zeros_mode="original", storage_scope="local"):
    """The decode function for the given formats, as ``{"func_name": name, "c_source":
    source}``: import the source with T.import_source(source) and call
    ``T.call_extern("handle", name, T.address_of(B_local[0]), T.address_of(D_local[0]), ...)``
    (arguments in the module docstring).

    Parameters
    ----------
    out_dtype : "float16", "int8" or "int4" (or "bfloat16")
        The type of the decoded values.
    source_format : "uint" or "int"
        Whether the fields are unsigned or signed (offset binary, see the module docstring).
    source_bit : 1, 2 or 4
        The width of a field (int4 outputs: 2 only).
    storage_dtype : str
        The integer type of the packed buffer (int8 by default); the decode reads its bytes,
        so it does not change the function.
    with_scaling, with_zeros : bool
        Multiply by a scale; subtract a zero point (with_zeros needs with_scaling and an
        unsigned source_format; float outputs only).
    zeros_mode : "original", "rescale" or "quantized"
        How the zero point applies (module docstring).
    storage_scope : "local" or "warp"
        "warp" with scaling selects the ``_offset`` form, whose second half of the outputs
        takes its scale (and zero) ``offset`` elements further.

    Raises ValueError for an unsupported value (the message names the argument) and
    TypeError for an argument of the wrong type.
    """
    out = _dtype_text(out_dtype, "out_dtype")
    if out not in _OUT:
        raise ValueError(f"get_lop3_intrin_group: out_dtype must be 'float16', 'int8' or 'int4' (or 'bfloat16'), "
                         f"got {out_dtype!r}")
    fmt = _source_format(source_format)
    if isinstance(source_bit, bool) or not isinstance(source_bit, int):
        raise TypeError(f"get_lop3_intrin_group: source_bit must be an int, got {type(source_bit).__name__}")
    if source_bit not in (1, 2, 4):
        raise ValueError(f"get_lop3_intrin_group: source_bit must be 1, 2 or 4, got {source_bit}")
    if out == "int4" and source_bit != 2:
        raise ValueError(f"get_lop3_intrin_group: out_dtype 'int4' takes source_bit 2, got source_bit {source_bit}")
    storage = _dtype_text(storage_dtype, "storage_dtype")
    if storage not in _STORAGE:
        raise ValueError(f"get_lop3_intrin_group: storage_dtype must be one of {', '.join(_STORAGE)}, "
                         f"got {storage_dtype!r}")
    _check_bool(with_scaling, "with_scaling")
    _check_bool(with_zeros, "with_zeros")
    if zeros_mode not in _ZEROS:
        raise ValueError(f"get_lop3_intrin_group: zeros_mode must be 'original', 'rescale' or 'quantized', "
                         f"got {zeros_mode!r}")
    if storage_scope not in ("local", "warp"):
        raise ValueError(f"get_lop3_intrin_group: storage_scope must be 'local' or 'warp', got {storage_scope!r}")
    if with_zeros and fmt == "int":
        raise ValueError("get_lop3_intrin_group: with_zeros=True needs source_format 'uint' (zero points are for "
                         "unsigned fields)")
    if with_zeros and not with_scaling:
        raise ValueError("get_lop3_intrin_group: with_zeros=True needs with_scaling=True")
    if (with_scaling or with_zeros) and out in ("int8", "int4"):
        raise ValueError(f"get_lop3_intrin_group: with_scaling / with_zeros need a float out_dtype, got {out!r}")

    offset = storage_scope == "warp" and with_scaling
    name = f"decode_i{source_bit}{'s' if fmt == 'int' else 'u'}_to_{_OUT[out]}"
    if with_scaling:
        name += "_scale"
    if with_zeros:
        name += f"_zeros_{zeros_mode}"
    if offset:
        name += "_offset"
    body = _wrapper(name, out, source_bit, fmt == "int", with_scaling, zeros_mode if with_zeros else None, offset)
    source = CORE + f"\n#ifndef TLQ_HAVE_{name}\n#define TLQ_HAVE_{name}\n{body}#endif\n"
    return {"func_name": name, "c_source": source}


def _wrapper(name, out, bits, signed, scale, zeros, offset):
    sgn = "true" if signed else "false"
    if out in ("int8", "int4"):
        call = (f"tlq::decode_int8<{bits}, {sgn}>(B, D, N)" if out == "int8"
                else f"tlq::decode_i2_to_int4<{sgn}>(B, D, N)")
        return (f"template <typename T1, typename T2>\n"
                f"TLQ_FN void {name}(const T1* B, T2* D, const int N = 16) {{ {call}; }}\n")
    head = "template <typename T1, typename T2{extra}>\nTLQ_FN void " + name + "(const T1* B, T2* D{params}) {{\n"
    if not scale:
        return (head.format(extra="", params=", const int N = 8")
                + f"  tlq::decode_float<{bits}, {sgn}, false, tlq::ZEROS_NONE>(B, D, N, 1.0f, 1.0f, 0.0f, 0.0f);\n}}\n")
    mode = "tlq::ZEROS_NONE" if zeros is None else f"tlq::{_ZEROS[zeros]}"
    lines = []
    if zeros is None:
        extra = ", typename T3"
        params = ", const T3* scale, const int offset = 0, const int N = 8" if offset else \
            ", const T3* scale, const int N = 8"
        lines.append("  const float z_l = 0.0f, z_r = 0.0f;")
    elif zeros == "quantized" and offset:
        extra = ", typename T3, typename T4"
        params = (", const T3* scale, const T4* qzeros, const int scale_offset = 0, const int zero_offset = 0, "
                  "const int group_offset = 0, const int N = 8")
        # The zero point is the bits-wide field group_offset of a packed element (upstream
        # passes the weights' storage type).
        lines.append("  const int zbytes = sizeof(T4) < 4 ? (int)sizeof(T4) : 4;")
        lines.append(f"  const unsigned int zmask = (1u << {bits}) - 1u;")
        lines.append("  const float z_l = (float)((tlq::load_le(reinterpret_cast<const unsigned char*>(qzeros), "
                     f"zbytes) >> (group_offset * {bits})) & zmask);")
        lines.append("  const float z_r = (float)((tlq::load_le(reinterpret_cast<const unsigned char*>(qzeros + "
                     f"zero_offset), zbytes) >> (group_offset * {bits})) & zmask);")
    else:
        extra = ", typename T3, typename T4"
        params = (", const T3* scale, const T4* zeros, const int offset = 0, const int N = 8" if offset
                  else ", const T3* scale, const T4* zeros, const int N = 8")
        zoff = "offset" if offset else "0"
        if zeros == "quantized":  # an integer zero point
            lines.append("  const float z_l = (float)(int)tlq::value_of(zeros);")
            lines.append(f"  const float z_r = (float)(int)tlq::value_of(zeros + {zoff});")
        else:
            lines.append("  const float z_l = tlq::value_of(zeros);")
            lines.append(f"  const float z_r = tlq::value_of(zeros + {zoff});")
    soff = ("scale_offset" if zeros == "quantized" else "offset") if offset else "0"
    lines.insert(0, "  const float s_l = tlq::value_of(scale);")
    lines.insert(1, f"  const float s_r = tlq::value_of(scale + {soff});")
    lines.append(f"  tlq::decode_float<{bits}, {sgn}, true, {mode}>(B, D, N, s_l, s_r, z_l, z_r);")
    return head.format(extra=extra, params=params) + "\n".join(lines) + "\n}\n"
