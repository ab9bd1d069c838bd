"""get_mxfp_intrin_group: the source and name of a device function that decodes packed FP4
(E2M1: sign, 2 exponent bits, 1 mantissa bit; values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
negatives) into bfloat16 or float16, for T.import_source and T.call_extern. The block scale
of the MX formats is applied by the caller (the examples multiply by ``2**scale``).

    decode_fp4_to_{bf16|f16}_twiddling(T1* B, T2* D, int N = 8)
    decode_fp4_to_{bf16|f16}(T1* B, T2* D, int N = 8)

Both decode N groups of 4 bytes into 8 values each (D[8i] to D[8i + 7] from B[4i] to
B[4i + 3]):

* twiddling: each pair of bytes (B[4i], B[4i + 1]) and (B[4i + 2], B[4i + 3]) is read as
  ``v = first << 8 | second`` and holds four values, in order, whose (sign, e1, e0, m) bits
  are the bits (15, 8, 7, 6), (12, 5, 4, 3), (9, 2, 1, 0) and (14, 11, 10, 13) of ``v``;
  the first pair gives D[8i] to D[8i + 3], the second D[8i + 4] to D[8i + 7]. This is the
  layout the examples' ``torch_convert_bit_twiddling`` reference reads.
* plain: byte ``B[4i + b]`` holds D[8i + b] in its low nibble and D[8i + b + 4] in its
  high nibble.

The decode is integer arithmetic (the output bit pattern is assembled directly on CUDA,
elsewhere the exact value is converted), the same source for CUDA, HIP and the cpu target.
"""
from __future__ import annotations

from ._decode_source import CORE

__all__ = ["get_mxfp_intrin_group"]


def get_mxfp_intrin_group(out_dtype="bfloat16", source_format="uint", source_bit=4, storage_dtype="uint8",
                          use_twiddling=False, target=None):
    """The FP4 decode function, as ``{"func_name": name, "c_source": source}``; name is
    ``decode_fp{source_bit}_to_{bf16|f16}``, with ``_twiddling`` when use_twiddling.

    out_dtype is "bfloat16" or "float16"; source_format "uint" or "int" (upstream's
    argument; FP4 carries its own sign, so both give the same function); source_bit must be
    4; storage_dtype one of int32, int8, uint8; target is accepted for upstream's signature
    (the source is the same for every target). Raises ValueError for an unsupported value
    (naming the argument) and TypeError for an argument of the wrong type."""
    from ..dtypes import canonical

    def dt(x, what):
        try:
            return canonical(x)
        except Exception:
            raise ValueError(f"get_mxfp_intrin_group: {what} must be a dtype, got {x!r}") from None

    out = dt(out_dtype, "out_dtype")
    if out not in ("bfloat16", "float16"):
        raise ValueError(f"get_mxfp_intrin_group: out_dtype must be 'bfloat16' or 'float16', got {out_dtype!r}")
    fmt = {"int32": "int", "uint32": "uint"}.get(str(source_format), str(source_format))
    if fmt not in ("int", "uint"):
        raise ValueError(f"get_mxfp_intrin_group: source_format must be 'int' or 'uint', got {source_format!r}")
    if isinstance(source_bit, bool) or not isinstance(source_bit, int):
        raise TypeError(f"get_mxfp_intrin_group: source_bit must be an int, got {type(source_bit).__name__}")
    if source_bit != 4:
        raise ValueError(f"get_mxfp_intrin_group: source_bit must be 4 (FP4 E2M1), got {source_bit}")
    storage = dt(storage_dtype, "storage_dtype")
    if storage not in ("int32", "int8", "uint8"):
        raise ValueError(f"get_mxfp_intrin_group: storage_dtype must be 'int32', 'int8' or 'uint8', "
                         f"got {storage_dtype!r}")
    if not isinstance(use_twiddling, bool):
        raise TypeError(f"get_mxfp_intrin_group: use_twiddling must be a bool, got {type(use_twiddling).__name__}")

    suffix = "bf16" if out == "bfloat16" else "f16"
    name = f"decode_fp4_to_{suffix}" + ("_twiddling" if use_twiddling else "")
    if use_twiddling:
        body = (f"template <typename T1, typename T2>\n"
                f"TLQ_FN void {name}(const T1* B, T2* D, const int N = 8) {{\n"
                "  const unsigned char* src = reinterpret_cast<const unsigned char*>(B);\n"
                "  for (int i = 0; i < N; ++i) {\n"
                "    const unsigned char* g = src + 4 * i;\n"
                "    const unsigned int first = (static_cast<unsigned int>(g[0]) << 8) | g[1];\n"
                "    const unsigned int second = (static_cast<unsigned int>(g[2]) << 8) | g[3];\n"
                "    for (int p = 0; p < 4; ++p) {\n"
                "      D[8 * i + p] = tlq::e2m1_out<T2>::make(tlq::twiddled_code(first, p));\n"
                "      D[8 * i + 4 + p] = tlq::e2m1_out<T2>::make(tlq::twiddled_code(second, p));\n"
                "    }\n"
                "  }\n"
                "}\n")
    else:
        body = (f"template <typename T1, typename T2>\n"
                f"TLQ_FN void {name}(const T1* B, T2* D, const int N = 8) {{\n"
                "  const unsigned char* src = reinterpret_cast<const unsigned char*>(B);\n"
                "  for (int i = 0; i < N; ++i) {\n"
                "    for (int b = 0; b < 4; ++b) {\n"
                "      const unsigned int byte = src[4 * i + b];\n"
                "      D[8 * i + b] = tlq::e2m1_out<T2>::make(byte & 15u);\n"
                "      D[8 * i + b + 4] = tlq::e2m1_out<T2>::make(byte >> 4);\n"
                "    }\n"
                "  }\n"
                "}\n")
    source = CORE + f"\n#ifndef TLQ_HAVE_{name}\n#define TLQ_HAVE_{name}\n{body}#endif\n"
    return {"func_name": name, "c_source": source}
