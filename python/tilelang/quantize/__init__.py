"""Quantized weights: expression builders that unpack low-bit fields inside a kernel
(``_tir_*``), host helpers that pack and interleave weights (general_compress,
interleave_weight, gen_quant4), and decode functions to import into a kernel
(get_lop3_intrin_group for integer fields, get_mxfp_intrin_group for FP4). See
docs/quantize.md."""
from .lop3 import get_lop3_intrin_group  # noqa: F401
from .mxfp import get_mxfp_intrin_group  # noqa: F401
from .quantization import (  # noqa: F401
    _tir_packed_int_to_int_convert,
    _tir_packed_to_fp4_to_f16,
    _tir_packed_to_signed_convert,
    _tir_packed_to_unsigned_convert,
    _tir_packed_to_unsigned_convert_with_zeros,
    _tir_u8_to_f4_to_bf16,
    _tir_u8_to_f8_e4m3_to_f16,
)
from .utils import gen_quant4, general_compress, interleave_weight  # noqa: F401

__all__ = [
    "get_lop3_intrin_group", "get_mxfp_intrin_group", "gen_quant4", "general_compress", "interleave_weight",
    "_tir_packed_int_to_int_convert", "_tir_packed_to_fp4_to_f16", "_tir_packed_to_signed_convert",
    "_tir_packed_to_unsigned_convert", "_tir_packed_to_unsigned_convert_with_zeros", "_tir_u8_to_f4_to_bf16",
    "_tir_u8_to_f8_e4m3_to_f16",
]
