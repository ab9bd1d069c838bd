"""Scalar math, casts, selects and constants. Python numbers fold in Python; kernel values
become IR calls."""
from __future__ import annotations

import builtins
import math as _pymath

from .. import _C
from ..dtypes import canonical
from ..ir import const_value, is_expr
from .eager import const  # noqa: F401 - T.const(3) and T.const("M, N")


def _any_expr(*xs):
    return any(is_expr(x) for x in xs)


def _unary(name):
    def fn(x):
        return _C.call(name, [x])
    fn.__name__ = name
    fn.__doc__ = f"T.{name}(x), computed in the argument's float type (float32 for integers)."
    return fn


exp = _unary("exp")
exp2 = _unary("exp2")
exp10 = _unary("exp10")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
erf = _unary("erf")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001
trunc = _unary("trunc")
isnan = _unary("isnan")
isinf = _unary("isinf")
acos = _unary("acos")
asin = _unary("asin")
atan = _unary("atan")
sinh = _unary("sinh")
cosh = _unary("cosh")
asinh = _unary("asinh")
acosh = _unary("acosh")
atanh = _unary("atanh")
nearbyint = _unary("nearbyint")
nearbyint.__doc__ = "T.nearbyint(x): x rounded to the nearest integer value, halves to even."


def isfinite(x):
    """Whether x is neither NaN nor infinite (true for integers)."""
    return _C.call("isfinite", [x])


def popcount(x):
    """The number of bits set in a 32- or 64-bit integer, as int32."""
    return _C.call("popcount", [x])


def clz(x):
    """The number of leading zero bits of a 32- or 64-bit integer (its width for 0), as int32."""
    return _C.call("clz", [x])


def atan2(x1, x2):
    """The angle of the point (x2, x1) (C's atan2(x1, x2))."""
    return _C.call("atan2", [x1, x2])


def copysign(x1, x2):
    """The magnitude of x1 with the sign of x2."""
    return _C.call("copysign", [x1, x2])


def hypot(x1, x2):
    """sqrt(x1 * x1 + x2 * x2), without overflow where the result fits."""
    return _C.call("hypot", [x1, x2])


def nextafter(x1, x2):
    """The next representable value after x1 in the direction of x2."""
    return _C.call("nextafter", [x1, x2])


def ldexp(x1, x2):
    """x1 * 2^x2, x2 an integer value."""
    return _C.call("ldexp", [x1, x2])


def fma(x, y, z):
    """x * y + z with one rounding."""
    return _C.call("fma", [x, y, z])


def abs(x):  # noqa: A001
    """`|x|`, the absolute value (a Python number stays a Python number)."""
    if not is_expr(x):
        return builtins.abs(x)
    return _C.call("abs", [x])


def pow(x, y):  # noqa: A001
    """x raised to the power y."""
    return _C.call("pow", [x, y])


def fmod(x, y):
    """The floating-point remainder of x / y, with the sign of x (C's fmod)."""
    return _C.call("fmod", [x, y])


def max(a, b, *rest):  # noqa: A001
    """The largest of two or more values (Python numbers fold to a Python number)."""
    out = builtins.max(a, b) if not _any_expr(a, b) else _C.binary("max", a, b)
    for r in rest:
        out = max(out, r)
    return out


def min(a, b, *rest):  # noqa: A001
    """The smallest of two or more values (Python numbers fold to a Python number)."""
    out = builtins.min(a, b) if not _any_expr(a, b) else _C.binary("min", a, b)
    for r in rest:
        out = min(out, r)
    return out


def clamp(x, lo, hi):
    """x limited to [lo, hi]: min(max(x, lo), hi), as upstream (the max first, so hi wins
    when lo > hi)."""
    return min(max(x, lo), hi)


def ceildiv(a, b):
    """(a + b - 1) // b."""
    if not _any_expr(a, b):
        return -(-a // b)
    return (a + b - 1) // b


def cdiv(lhs, rhs):
    """T.ceildiv(lhs, rhs) (upstream's other name for it)."""
    return ceildiv(lhs, rhs)


def align_up(x, y):
    """x rounded up to a multiple of y."""
    return ceildiv(x, y) * y


def likely(cond):
    """cond, marked as usually true (a hint: the value is cond itself here)."""
    return cond


def fabs(x):
    """The absolute value of x (T.abs)."""
    return abs(x)


def fmul(x, y):
    """x * y."""
    return x * y


def index_to_coordinates(index, shape):
    """The row-major coordinates of flat position `index` in a tensor of `shape`."""
    coords = []
    for extent in reversed(list(shape)):
        coords.append(index % extent)
        index = index // extent
    return coords[::-1]


def floordiv(a, b):
    """a / b rounded toward negative infinity (Python's //)."""
    return a // b if not _any_expr(a, b) else _C.binary("floordiv", a, b)


def floormod(a, b):
    """The remainder of floordiv, with the sign of b (Python's %)."""
    return a % b if not _any_expr(a, b) else _C.binary("floormod", a, b)


def truncdiv(a, b):
    """a / b rounded toward zero (C's integer division)."""
    if not _any_expr(a, b):
        return int(a / b)
    return _C.binary("div", a, b)


def truncmod(a, b):
    """The remainder of truncdiv, with the sign of a (C's %)."""
    if not _any_expr(a, b):
        return _pymath.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else a - b * int(a / b)
    return _C.binary("mod", a, b)


def cast(value, dtype):
    """value converted to dtype."""
    return _C.cast(canonical(dtype), value)


def Cast(dtype, value):
    """value converted to dtype: T.cast with the dtype first, as upstream spells it."""
    return _C.cast(canonical(dtype), value)


def if_then_else(cond, true_value, false_value):
    """true_value where cond holds, else false_value (both are evaluated)."""
    if not is_expr(cond):
        return true_value if cond else false_value
    return _C.select(cond, true_value, false_value)


Select = if_then_else


def And(a, b):
    """The logical and of two conditions."""
    return _C.binary("and", a, b)


def Or(a, b):
    """The logical or of two conditions."""
    return _C.binary("or", a, b)


def Not(a):
    """The logical negation of a condition."""
    return _C.logical_not(a)


def infinity(dtype):
    """Positive infinity in the floating dtype given."""
    return _C.infinity(canonical(dtype))


def max_value(dtype):
    """The largest finite value of dtype."""
    return _C.max_value(canonical(dtype))


def min_value(dtype):
    """The smallest (most negative) finite value of dtype."""
    return _C.min_value(canonical(dtype))


def FloatImm(dtype, value):
    """A floating-point constant of dtype (dtype first, as upstream)."""
    return _C.const(float(value), canonical(dtype))


def IntImm(dtype, value):
    """An integer constant of dtype (dtype first, as upstream)."""
    return _C.const(int(value), canonical(dtype))


def constant_value(x):
    return const_value(x)
