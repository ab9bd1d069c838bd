"""Python AST -> IR.

The parser walks a kernel's syntax tree and evaluates it. Python-level values (closure
constants, tile sizes, dtypes, helper functions, loops over lists, `if` on Python values)
are computed right here, at parse time. Everything that depends on kernel arguments or
loop variables is an IR expression (the C++ handles overload Python's operators), and the
statements that act on such values become IR statements in the builder.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import operator
import textwrap

from .. import _C
from ..errors import (TileLangError, TileLangNameError, TileLangSyntaxError, TileLangTypeError)
from ..ir import Buffer, Region, is_expr
from . import builder as _builder

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.MatMult: operator.matmul,
}
_CMPOPS = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_PYTHON_LOOP_LIMIT = 1 << 16


class VarRef:
    """A name bound to a T.alloc_var buffer: reading it loads, assigning it stores."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: Buffer):
        self.buffer = buffer


class Scope:
    __slots__ = ("names", "ir")

    def __init__(self, ir: bool):
        self.names = {}
        self.ir = ir  # opened by a kernel construct (loop body, branch, kernel)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value):
        self.value = value


def _source_of(fn):
    try:
        lines, start = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    except (OSError, TypeError) as e:
        raise TileLangSyntaxError(
            f"cannot read the source of '{getattr(fn, '__name__', fn)}': {e}", None, None,
            "kernels must be defined in a file (not typed into an interactive prompt or exec)") from e
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, start - 1)
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TileLangSyntaxError("a kernel must be a function definition", file, start)
    return file, fdef


def _closure_of(fn):
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # a free variable not assigned yet
            pass
    return out


class Parser:
    """Evaluates one function body (a prim_func, or a macro inlined into one)."""

    def __init__(self, fn, builder, enclosing=None):
        self.fn = fn
        self.file, self.fdef = _source_of(fn)
        self.globals = fn.__globals__
        # Names of the scope the function was defined in: annotations are evaluated there,
        # and they need not be free variables of the body (`A: T.Tensor((M, K), dtype)`).
        self.closure = dict(enclosing or {})
        self.closure.update(_closure_of(fn))
        self.builder = builder
        self.scopes = [Scope(ir=False)]
        self.in_ws_block = False  # inside `with T.ws(...)`

    # ------------------------------------------------------------------ names
    def lookup(self, name: str, node):
        for scope in reversed(self.scopes):
            if name in scope.names:
                return scope.names[name]
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(TileLangNameError, f"name '{name}' is not defined", node,
                         "define it in the enclosing Python scope, or pass it as a parameter")

    def find_binding(self, name):
        """(scope index, value) of the innermost binding of name, or (None, None)."""
        for i in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[i].names:
                return i, self.scopes[i].names[name]
        return None, None

    def bind(self, name: str, value, node):
        idx, old = self.find_binding(name)
        if isinstance(old, VarRef) and not isinstance(value, (Buffer, VarRef)):
            self.builder.emit(_C.store(old.buffer.handle, value, [0]))
            return
        crosses_kernel_scope = idx is not None and any(s.ir for s in self.scopes[idx + 1:])
        if crosses_kernel_scope:
            raise self.error(
                TileLangSyntaxError,
                f"'{name}' is reassigned inside a kernel loop or branch but defined outside it", node,
                f"make it a kernel variable: {name} = T.alloc_var(dtype) before the loop, then assign it")
        if is_expr(value) and value.kind not in ("IntImm", "FloatImm", "StringImm", "Var") \
                and self.builder.frames:
            # A kernel value bound to a name is evaluated once, here (a let binding), so that
            # later stores to buffers it read from do not change it.
            var = _C.var(name, value.dtype)
            self.builder.emit_let(var, value)
            value = var
        elif isinstance(value, Buffer) and value.scope == "local.var" and self._is_fresh_alloc(value):
            value = VarRef(value)
        self.scopes[-1].names[name] = value

    def _is_fresh_alloc(self, buf: Buffer) -> bool:
        items = self.builder.frames[-1].items
        return bool(items) and items[-1][0] == "alloc" and items[-1][1].same_as(buf.handle)

    # ------------------------------------------------------------------ errors
    def error(self, cls, message, node=None, hint=None):
        line = getattr(node, "lineno", None) or self.builder.line
        return cls(message, self.file, line, hint)

    def wrap(self, e: Exception, node):
        if isinstance(e, NameError):
            cls = TileLangNameError
        elif isinstance(e, TypeError):
            cls = TileLangTypeError
        elif isinstance(e, SyntaxError):  # e.g. a construct evaluated as Python that is not valid there
            cls = TileLangSyntaxError
        else:
            cls = TileLangError
        return self.error(cls, f"{type(e).__name__}: {e}", node)

    # ------------------------------------------------------------------ statements
    def visit_body(self, stmts):
        for s in stmts:
            self.visit_stmt(s)

    def visit_stmt(self, node):
        self.builder.set_line(node.lineno, node.col_offset)
        handler = getattr(self, "stmt_" + type(node).__name__, None)
        if handler is None:
            raise self.error(TileLangSyntaxError, f"'{_describe(node)}' is not supported in a kernel", node,
                             _UNSUPPORTED_HINTS.get(type(node).__name__))
        try:
            handler(node)
        except (TileLangError, _Break, _Continue, _Return):
            raise
        except Exception as e:  # an error raised by Python code the kernel called
            raise self.wrap(e, node) from e

    def stmt_Expr(self, node):
        value = self.ev(node.value)
        if is_expr(value) and value.kind == "Call":
            self.builder.emit(_C.evaluate(value))

    def stmt_Pass(self, node):
        pass

    def stmt_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.builder.pending_name = node.targets[0].id
        try:
            value = self.ev(node.value)
        finally:
            self.builder.pending_name = None
        value = self.thread_binding_value(value, node)
        for target in node.targets:
            self.assign(target, value, node)

    def thread_binding_value(self, value, node):
        """`tx = T.thread_binding(0, n, thread="threadIdx.x")` (TVM script's launch-thread
        spelling) names the thread index, as the loop form does."""
        from ..language.loops import LoopSpec
        if not (isinstance(value, LoopSpec) and value.kind == "thread_binding"):
            return value
        return self.thread_index_of(value, node)

    def stmt_AnnAssign(self, node):
        if node.value is None:
            eager = self.builder.eager
            if eager is not None and isinstance(node.target, ast.Name) and node.target.id in eager.pending:
                eager.declare(self, node)  # `A: T.Tensor((M, K), dtype)`: a parameter's type
            return
        value = self.ev(node.value)
        ann = self.ev(node.annotation)
        if is_expr(value) and isinstance(ann, str):
            value = _C.cast(str(ann), value)
        self.assign(node.target, value, node)

    def stmt_AugAssign(self, node):
        op = _BINOPS[type(node.op)]
        target = node.target
        if isinstance(target, ast.Name):
            current = self.ev(target)
            self.assign(target, self.binop(op, current, self.ev(node.value), node), node)
        elif isinstance(target, ast.Subscript):
            obj = self.ev_container(target.value)
            key = self.ev(target.slice)
            current = obj[key]
            self.store(obj, key, self.binop(op, current, self.ev(node.value), node), node)
        else:
            raise self.error(TileLangSyntaxError, "unsupported augmented assignment target", node)

    def assign(self, target, value, node):
        if isinstance(target, ast.Name):
            self.bind(target.id, value, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            try:
                values = list(value)
            except TypeError:
                raise self.error(TileLangTypeError, "cannot unpack a kernel value into several names", node)
            if len(values) != len(target.elts):
                raise self.error(TileLangTypeError,
                                 f"cannot unpack {len(values)} values into {len(target.elts)} names", node)
            for t, v in zip(target.elts, values):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            self.store(self.ev_container(target.value), self.ev(target.slice), value, node)
        else:
            raise self.error(TileLangSyntaxError, f"cannot assign to '{_describe(target)}'", node)

    def store(self, obj, key, value, node):
        if isinstance(obj, VarRef):
            obj = obj.buffer
        if isinstance(obj, Buffer):
            idx = obj._normalise_key(key)
            if any(isinstance(k, slice) for k in idx):
                raise self.error(TileLangSyntaxError, f"assignment to a slice of buffer '{obj.name}'", node,
                                 "assign elements inside a T.Parallel loop, or use T.fill / T.copy")
            if isinstance(value, (Buffer, Region)):
                raise self.error(TileLangTypeError, f"a buffer is assigned to an element of '{obj.name}'", node,
                                 "use T.copy to copy a tile")
            from ..language import reducer
            if reducer.info_of(obj) is not None:  # `acc[i] += v` on a reducer: a contribution
                reducer.update(obj, list(idx), value)
                return
            self.builder.emit(_C.store(obj.handle, value, list(idx)))
        else:
            obj[key] = value  # a Python container

    def stmt_Return(self, node):
        # Inside kernel code (a T.Kernel block, a kernel loop or branch) a return would end
        # the parse and drop the statements around it: the kernel has no early exit.
        if any(s.ir for s in self.scopes):
            raise self.error(TileLangSyntaxError, "'return' inside a kernel body", node,
                             "a kernel runs to its end: put the remaining work under an `if` instead of "
                             "returning early")
        if self.builder.eager is not None and self.builder.eager.reading_signature:
            raise _Return(None)  # what it returns may be made in a kernel body, not parsed then
        raise _Return(None if node.value is None else self.ev(node.value))

    def stmt_Break(self, node):
        raise _Break()

    def stmt_Continue(self, node):
        raise _Continue()

    def stmt_Assert(self, node):
        cond = self.ev(node.test)
        if is_expr(cond) and cond.kind != "IntImm" and self.builder.eager is not None \
                and self.builder.eager.reading_signature:
            return  # shapes are symbols while an eager function's signature is read
        if is_expr(cond) and cond.kind != "IntImm":
            raise self.error(TileLangSyntaxError, "assert on a kernel value is not supported", node,
                             "assert only on Python values (shapes, tile sizes) at parse time")
        if not cond:
            msg = self.ev(node.msg) if node.msg is not None else "assertion failed"
            raise self.error(TileLangError, f"kernel assertion failed: {msg}", node)

    def stmt_If(self, node):
        self.branch(self.ev(node.test), node.body, node.orelse, node)

    def branch(self, cond, then_stmts, else_stmts, node):
        if not is_expr(cond) or cond.kind == "IntImm":
            self.visit_body(then_stmts if cond else else_stmts)  # decided at parse time
            return
        then_body = self.ir_block(then_stmts)
        else_body = self.ir_block(else_stmts) if else_stmts else None
        self.builder.set_line(node.lineno, node.col_offset)
        self.builder.emit(_C.if_(cond, then_body, else_body))

    def if_frame(self, node, cond):
        """`with T.If(c), T.Then(): body`, or `with T.If(c):` holding `with T.Then():` and
        an optional `with T.Else():`: the branch `if c: ... else: ...`."""
        from ..language.frames import ElseFrame, ThenFrame
        if len(node.items) == 2:
            if not isinstance(self.ev(node.items[1].context_expr), ThenFrame):
                raise self.error(TileLangSyntaxError, "`with T.If(c), ...` takes T.Then() as its second item", node)
            self.branch(cond, node.body, [], node)
            return
        parts = {}
        for stmt in node.body:
            frame = None
            if isinstance(stmt, ast.With) and len(stmt.items) == 1:
                frame = self.ev(stmt.items[0].context_expr)
            kind = "then" if isinstance(frame, ThenFrame) else "else" if isinstance(frame, ElseFrame) else None
            if kind is None or kind in parts or (kind == "else" and "then" not in parts):
                raise self.error(TileLangSyntaxError, "the body of `with T.If(c):` is `with T.Then():` and then "
                                 "optionally `with T.Else():`", stmt)
            parts[kind] = stmt.body
        if "then" not in parts:
            raise self.error(TileLangSyntaxError, "`with T.If(c):` has no `with T.Then():` block", node)
        self.branch(cond, parts["then"], parts.get("else", []), node)

    def ir_block(self, stmts, names=None):
        """Parses stmts as a block of kernel code with its own frame and names (`names`
        binds loop variables in it)."""
        self.builder.push()
        self.scopes.append(Scope(ir=True))
        self.scopes[-1].names.update(names or {})
        try:
            for s in stmts:
                try:
                    self.visit_stmt(s)
                except (_Break, _Continue) as e:
                    raise self.error(TileLangSyntaxError, f"'{type(e).__name__[1:].lower()}' in a kernel loop",
                                     s, "leave a T.serial or while loop with `T.loop_break()` (skip to its next "
                                     "iteration with `T.continue_loop()`), or use an if inside the loop")
        finally:
            self.scopes.pop()
            body = self.builder.pop()
        return body

    def stmt_While(self, node):
        for count in range(_PYTHON_LOOP_LIMIT):
            cond = self.ev(node.test)
            if is_expr(cond) and cond.kind != "IntImm":
                if count:
                    raise self.error(TileLangSyntaxError, "a while loop whose condition became a kernel value "
                                     "after running at parse time", node,
                                     "make the condition a kernel value from the start, or a Python one throughout")
                self.kernel_while(node, cond)
                return
            if not cond:
                break
            try:
                self.visit_body(node.body)
            except _Break:
                break
            except _Continue:
                continue
        else:
            raise self.error(TileLangSyntaxError, "a parse-time while loop ran too many iterations", node)

    def kernel_while(self, node, cond):
        """`while cond:` on a kernel value: a loop of the kernel, its condition read before
        every iteration (T.loop_break() leaves it)."""
        if node.orelse:
            raise self.error(TileLangSyntaxError, "while ... else in a kernel loop", node)
        self.builder.loop_kinds.append("while")
        try:
            body = self.ir_block(node.body)
        finally:
            self.builder.loop_kinds.pop()
        self.builder.set_line(node.lineno, node.col_offset)
        self.builder.emit(_C.while_(cond, body))

    def stmt_For(self, node):
        spec, iterable = self.loop_spec(node.iter)
        if spec is None:
            self.python_for(node, iterable)
            return
        names = _target_names(node.target)
        if names is None:
            raise self.error(TileLangSyntaxError, "a kernel loop variable must be a name or a tuple of names",
                             node)
        if len(names) != len(spec.ranges):
            raise self.error(TileLangTypeError,
                             f"{len(spec.ranges)} loop extent(s) but {len(names)} loop variable(s)", node,
                             f"write `for {', '.join('i%d' % k for k in range(len(spec.ranges)))} in ...`")
        if spec.kind == "thread_binding":
            self.thread_bound_block(node, names[0], spec)
            return
        if spec.kind == "persistent":
            self.persistent_loop(node, names, spec)
            return
        loop_vars = []
        for name, (mn, ext) in zip(names, spec.ranges):
            dtype = "int64" if "int64" in (getattr(mn, "dtype", ""), getattr(ext, "dtype", "")) else "int32"
            loop_vars.append(_C.var(name, dtype))
        # A stepped loop (T.serial(start, stop, step)) counts k; its name is start + k * step.
        values = [v if stride is None else stride[0] + v * stride[1] for v, stride in zip(loop_vars, spec.strides)]
        self.builder.loop_kinds.append(spec.kind)
        try:
            body = self.ir_block(node.body, dict(zip(names, values)))
        finally:
            self.builder.loop_kinds.pop()
        self.builder.set_line(node.lineno, node.col_offset)
        for k in range(len(loop_vars) - 1, -1, -1):
            mn, ext = spec.ranges[k]
            attrs = spec.attrs if k == 0 else {}
            body = _C.for_(loop_vars[k], mn, ext, spec.kind, body, attrs)
        if node.orelse:
            raise self.error(TileLangSyntaxError, "for ... else in a kernel loop", node)
        self.builder.emit(body)

    def thread_bound_block(self, node, name, spec):
        """The body of `for tx in T.thread_binding(n, thread="threadIdx.x")`, once, with tx the
        thread index: n must be the kernel's thread extent on that axis."""
        if node.orelse:
            raise self.error(TileLangSyntaxError, "for ... else in a kernel loop", node)
        self.builder.emit(self.ir_block(node.body, {name: self.thread_index_of(spec, node)}))

    def thread_index_of(self, spec, node):
        """The thread index a T.thread_binding names: its range must be the kernel's thread
        extent on that axis."""
        from ..errors import TileLangUnsupportedError
        if not self.builder.kernels:
            raise self.error(TileLangSyntaxError, "T.thread_binding is used outside a T.Kernel block", node)
        dim = "xyz".index(spec.attrs["thread"][-1])
        threads = self.builder.kernels[-1][1]
        (start, extent), = spec.ranges
        have = threads[dim] if dim < len(threads) else 1
        if not (isinstance(start, int) and start == 0 and isinstance(extent, int) and extent == have):
            raise self.error(TileLangUnsupportedError,
                             f"T.thread_binding over [{start}, {start} + {extent}) on {spec.attrs['thread']}, but the "
                             f"kernel has {have} thread(s) on that axis", node,
                             f"bind the whole axis: T.thread_binding({have}, thread=\"{spec.attrs['thread']}\")")
        return _C.call("thread_index", [dim])

    def persistent_loop(self, node, names, spec):
        """`for v0, v1 in T.Persistent(domain, wave_size, index, group_size)`: a serial loop
        over this block's tiles w * wave_size + index (exactly those inside the domain),
        with the tile's coordinates bound by lets."""
        from ..language.math import max as kmax, min as kmin
        if node.orelse:
            raise self.error(TileLangSyntaxError, "for ... else in a kernel loop", node)
        domain = [ext for _, ext in spec.ranges]
        wave, index, group = spec.attrs["wave_size"], spec.attrs["index"], spec.attrs["group_size"]
        for name, value in (("wave_size", wave), ("index", index)):
            if not (is_expr(value) or (isinstance(value, int) and not isinstance(value, bool))):
                raise self.error(TileLangTypeError, f"T.Persistent: {name} must be an integer, got {value!r}", node)
        if isinstance(wave, int) and wave < 1:
            raise self.error(TileLangTypeError, f"T.Persistent: wave_size must be positive, got {wave}", node,
                             "pass the number of blocks the kernel launches (e.g. the SM count)")
        lead = 1
        for d in domain[:-1]:
            lead = lead * d
        total = lead * domain[-1]
        group = kmin(group, domain[-1])
        w = _C.var("w", "int32")
        tile = w * wave + index
        per_group = lead * group
        first = tile // per_group * group             # the group's first coordinate along the last dimension
        width = kmin(group, domain[-1] - first)       # the last group may be narrower
        local = tile % per_group
        coords = [None] * len(domain)
        coords[-1] = first + local % width
        rest = local // width
        for k in range(len(domain) - 2, -1, -1):
            coords[k] = rest % domain[k] if k else rest
            rest = rest // domain[k]
        # Every coordinate lies in its extent; the clamp says so to the compiler, which can
        # then prove the tile's accesses in bounds (no tail guards, vector stores).
        coords = [kmin(kmax(c, 0), d - 1) for c, d in zip(coords, domain)]
        coord_vars = [_C.var(name, "int32") for name in names]
        body = self.ir_block(node.body, dict(zip(names, coord_vars)))
        self.builder.set_line(node.lineno, node.col_offset)
        for v, value in reversed(list(zip(coord_vars, coords))):
            body = _C.let(v, value, body)
        waves = kmax((total - index + wave - 1) // wave, 0)
        self.builder.emit(_C.for_(w, 0, waves, "serial", body, {}))

    def warp_specialized_block(self, node, spec):
        """`with T.ws(ids):` -> `if thread_range(lo, hi): body` (docs/gpu_lowering.md)."""
        from ..errors import TileLangUnsupportedError
        if not self.builder.kernels:
            raise self.error(TileLangSyntaxError, "T.ws is used outside a T.Kernel block", node)
        if self.in_ws_block:
            raise self.error(TileLangSyntaxError, "T.ws blocks cannot be nested", node)
        if node.items[0].optional_vars is not None:
            raise self.error(TileLangSyntaxError, "`with T.ws(...)` binds no name", node)
        threads = self.builder.kernels[-1][1]
        total = 1
        for t in threads:
            total *= t
        if len(threads) != 1 or spec.hi > total:
            raise self.error(TileLangUnsupportedError,
                             f"T.ws over threads [{spec.lo}, {spec.hi}), but the block has threads={list(threads)}",
                             "T.ws needs a 1-D block of whole warpgroups that includes the ids named")
        self.in_ws_block = True
        try:
            body = self.ir_block(node.body)
        finally:
            self.in_ws_block = False
        self.builder.set_line(node.lineno, node.col_offset)
        self.builder.emit(_C.if_(_C.call("thread_range", [spec.lo, spec.hi]), body, None))

    def attr_block(self, node, spec):
        """`with T.attr(node, key, value):` -> the body, with the meaning of its key
        (language/frames.py ATTR_KEYS)."""
        from ..errors import TileLangUnsupportedError
        from ..language.frames import ATTR_KEYS
        if not self.builder.kernels:
            raise self.error(TileLangSyntaxError, "T.attr is used outside a T.Kernel block", node)
        if node.items[0].optional_vars is not None:
            raise self.error(TileLangSyntaxError, "`with T.attr(...)` binds no name", node)
        if spec.key not in ATTR_KEYS:
            known = "; ".join(f"{k!r}: {v}" for k, v in ATTR_KEYS.items())
            raise self.error(TileLangUnsupportedError, f"T.attr: the attribute {spec.key!r} has no meaning here",
                             node, f"the keys understood are {known}")
        if spec.key == "reduce_scope":
            from ..language.simt import CommReducer
            if not isinstance(spec.node, CommReducer):
                raise self.error(TileLangTypeError, "T.attr(node, \"reduce_scope\", ...): node must be a "
                                 f"T.comm_reducer, got {type(spec.node).__name__}", node)
            self.builder.reducers.append(spec.node)
            try:
                body = self.ir_block(node.body)
            finally:
                self.builder.reducers.pop()
            self.builder.emit(body)
            return
        if spec.value != 1:
            raise self.error(TileLangUnsupportedError,
                             f"T.attr(..., {spec.key!r}, {spec.value!r}): the value of {spec.key!r} is 1", node)
        body = self.ir_block(node.body)
        self.builder.set_line(node.lineno, node.col_offset)
        self.builder.emit(_C.async_scope(body))

    def loop_spec(self, iter_node):
        """(LoopSpec, None) for a kernel loop, (None, iterable) for a loop over Python values.
        `range` is a kernel loop (T.serial), as in TileLang."""
        from ..language.loops import LoopSpec, serial
        if isinstance(iter_node, ast.Call):
            fn = self.ev(iter_node.func)
            if fn is builtins.range:
                return serial(*[self.ev(a) for a in iter_node.args]), None
            value = self.call(fn, iter_node)
        else:
            value = self.ev(iter_node)
        if isinstance(value, LoopSpec):
            return value, None
        return None, value

    def python_for(self, node, iterable):
        count = 0
        for item in iterable:
            count += 1
            if count > _PYTHON_LOOP_LIMIT:
                raise self.error(TileLangSyntaxError, "a parse-time loop ran too many iterations", node)
            self.assign(node.target, item, node)
            try:
                self.visit_body(node.body)
            except _Break:
                return
            except _Continue:
                continue
        else:
            self.visit_body(node.orelse)

    def stmt_With(self, node):
        from ..language.frames import AttrFrame, ElseFrame, IfFrame, ThenFrame
        from ..language.hopper import WarpSpecializeSpec
        from ..language.kernel import KernelSpec
        item = node.items[0]
        spec = self.ev(item.context_expr)
        if isinstance(spec, IfFrame) and len(node.items) <= 2:
            self.if_frame(node, spec.cond)
            return
        if len(node.items) != 1:
            raise self.error(TileLangSyntaxError, "a with statement in a kernel takes one T.Kernel(...)", node)
        if isinstance(spec, (ThenFrame, ElseFrame)):
            raise self.error(TileLangSyntaxError, f"T.{'Then' if isinstance(spec, ThenFrame) else 'Else'}() "
                             "outside `with T.If(c):`", node)
        if isinstance(spec, WarpSpecializeSpec):
            self.warp_specialized_block(node, spec)
            return
        if isinstance(spec, AttrFrame):
            self.attr_block(node, spec)
            return
        if not isinstance(spec, KernelSpec):
            raise self.error(TileLangSyntaxError,
                             "the with-blocks in a kernel are `with T.Kernel(...)` and `with T.ws(...)`", node)
        if self.builder.kernels:
            # A T.Kernel with the enclosing one's launch names the same blocks again (upstream
            # accepts it; a tilelang-puzzles solution repeats its `with T.Kernel(...)` line).
            outer = self.kernel_launch
            if outer is None or not self._same_launch(outer, spec):
                raise self.error(TileLangSyntaxError, "T.Kernel blocks cannot be nested", node,
                                 "a T.Kernel inside another is the same kernel only with the same grid, threads "
                                 "and cluster; write one T.Kernel per launch")
            self._rebind_kernel(node, item, spec, outer[3])
            return
        if self.builder.eager is not None and self.builder.eager.reading_signature:
            return  # the signature is known before the kernel body, which needs the shapes' values
        default_names = ["bx", "by", "bz"]
        names = _target_names(item.optional_vars) if item.optional_vars is not None else []
        if names is None:
            raise self.error(TileLangSyntaxError, "`as` of T.Kernel takes a name or a tuple of names", node)
        # `as ids` over several grid extents binds the list of block indices (as upstream).
        as_list = isinstance(item.optional_vars, ast.Name) and len(spec.grid) > 1
        if as_list:
            list_name, names = names[0], []
        if len(names) > len(spec.grid):
            raise self.error(TileLangTypeError,
                             f"T.Kernel has {len(spec.grid)} grid extent(s) but binds {len(names)} name(s)", node)
        block_vars = []
        for d, extent in enumerate(spec.grid):
            name = names[d] if d < len(names) else default_names[d]
            dtype = getattr(extent, "dtype", "int32")
            block_vars.append(_C.var(name, dtype if dtype in ("int32", "int64") else "int32"))
        thread_vars = [_C.var(n, "int32") for n in ("tx", "ty", "tz")[: len(spec.threads)]]
        if spec.prelude is not None:
            self.builder.prelude.append(spec.prelude)
        self.builder.kernels.append((thread_vars, spec.threads, block_vars, list(spec.grid), list(spec.cluster or [])))
        self.kernel_launch = (list(spec.grid), list(spec.threads), list(spec.cluster or []), block_vars)
        self.builder.push()
        self.scopes.append(Scope(ir=True))
        try:
            for name, v in zip(names, block_vars):
                self.scopes[-1].names[name] = v
            if as_list:
                self.scopes[-1].names[list_name] = list(block_vars)
            self.visit_body(node.body)
        finally:
            self.scopes.pop()
            body = self.builder.pop()
            self.builder.kernels.pop()
            self.kernel_launch = None
        self.builder.set_line(node.lineno, node.col_offset)
        self.builder.emit(_C.kernel(block_vars, list(spec.grid), thread_vars, spec.threads, body, spec.cluster or []))

    kernel_launch = None  # (grid, threads, cluster, block vars) of the T.Kernel being parsed

    @staticmethod
    def _same_launch(outer, spec):
        def same(xs, ys):
            ys = list(ys or [])
            if len(xs) != len(ys):
                return False
            for x, y in zip(xs, ys):
                if isinstance(x, int) and isinstance(y, int):
                    if x != y:
                        return False
                elif isinstance(x, int) or isinstance(y, int):
                    xe = _C.const(x, "int32") if isinstance(x, int) else x
                    ye = _C.const(y, "int32") if isinstance(y, int) else y
                    if not _C.prove_equal(xe, ye):
                        return False
                elif not _C.prove_equal(x, y):
                    return False
            return True
        grid, threads, cluster, _ = outer
        return same(grid, spec.grid) and same(threads, spec.threads) and same(cluster, spec.cluster)

    def _rebind_kernel(self, node, item, spec, block_vars):
        """The body of a T.Kernel repeating the enclosing launch: its names bound to the
        enclosing kernel's block indices, its statements part of that kernel."""
        names = _target_names(item.optional_vars) if item.optional_vars is not None else []
        if names is None:
            raise self.error(TileLangSyntaxError, "`as` of T.Kernel takes a name or a tuple of names", node)
        self.scopes.append(Scope(ir=True))
        try:
            if isinstance(item.optional_vars, ast.Name) and len(spec.grid) > 1:
                self.scopes[-1].names[names[0]] = list(block_vars)
            else:
                if len(names) > len(spec.grid):
                    raise self.error(TileLangTypeError, f"T.Kernel has {len(spec.grid)} grid extent(s) but binds "
                                     f"{len(names)} name(s)", node)
                for name, v in zip(names, block_vars):
                    self.scopes[-1].names[name] = v
            self.visit_body(node.body)
        finally:
            self.scopes.pop()

    # ------------------------------------------------------------------ expressions
    def ev(self, node):
        handler = getattr(self, "ex_" + type(node).__name__, None)
        if handler is None:
            return self.ev_python(node)
        return handler(node)

    def ex_Constant(self, node):
        return node.value

    def ex_Name(self, node):
        value = self.lookup(node.id, node)
        if isinstance(value, VarRef):
            return _C.load(value.buffer.handle, [0])
        return value

    def ex_Attribute(self, node):
        obj = self.ev(node.value)
        try:
            return getattr(obj, node.attr)
        except AttributeError:
            owner = _describe(node.value)
            raise self.error(TileLangNameError, f"'{owner}' has no attribute '{node.attr}'", node,
                             "check the spelling; the kernel language's names are listed in tilelang.language")

    def ev_container(self, node):
        """Like ev, but a name bound by T.alloc_var gives its buffer (for `acc[0]`)."""
        if isinstance(node, ast.Name):
            value = self.lookup(node.id, node)
            return value.buffer if isinstance(value, VarRef) else value
        return self.ev(node)

    def ex_Subscript(self, node):
        obj = self.ev_container(node.value)
        key = self.ev(node.slice)
        if isinstance(obj, VarRef):
            obj = obj.buffer
        return obj[key]

    def ex_Index(self, node):  # Python < 3.9
        return self.ev(node.value)

    def ex_Slice(self, node):
        ev = lambda n: None if n is None else self.ev(n)  # noqa: E731
        return slice(ev(node.lower), ev(node.upper), ev(node.step))

    def ex_Tuple(self, node):
        return tuple(self.ev_elts(node.elts))

    def ex_List(self, node):
        return list(self.ev_elts(node.elts))

    def ev_elts(self, elts):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self.ev(e.value))
            else:
                out.append(self.ev(e))
        return out

    def binop(self, op, a, b, node):
        if (is_expr(a) or is_expr(b)) and op is operator.matmul:
            sym = "@"
            raise self.error(TileLangSyntaxError, f"operator '{sym}' on kernel values is not supported", node)
        if isinstance(a, (Buffer, Region)) or isinstance(b, (Buffer, Region)):
            raise self.error(TileLangTypeError, "arithmetic on a whole buffer", node,
                             "index the buffer (A[i, j]) inside a T.Parallel loop")
        # On kernel values & | ^ ~ << >> are C's bit operations of integers, and & | ^ ~ the
        # logical ones of bools (as in TileLang); the IR checks the operand types.
        return op(a, b)

    def ex_BinOp(self, node):
        return self.binop(_BINOPS[type(node.op)], self.ev(node.left), self.ev(node.right), node)

    def ex_UnaryOp(self, node):
        v = self.ev(node.operand)
        if isinstance(node.op, ast.Not):
            return _C.logical_not(v) if is_expr(v) else not v
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return +v
        return ~v

    def ex_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        result = None
        for i, value_node in enumerate(node.values):
            v = self.ev(value_node)
            if i == 0:
                result = v
            elif is_expr(result) or is_expr(v):
                result = _C.binary("and" if is_and else "or", result, v)
            else:
                result = (result and v) if is_and else (result or v)
            if not is_expr(result) and (not result if is_and else result):
                return result  # short circuit on a Python value
        return result

    def ex_Compare(self, node):
        left = self.ev(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.ev(right_node)
            if isinstance(op, (ast.Is, ast.IsNot)) and (is_expr(left) or is_expr(right)) \
                    and left is not None and right is not None:
                # Identity of two IR handles is decided at parse time and is never the
                # comparison of the values the program means.
                raise self.error(TileLangSyntaxError, f"'{'is' if isinstance(op, ast.Is) else 'is not'}' on "
                                 "kernel values compares Python objects, not values", node,
                                 "use == or != to compare values")
            r = _CMPOPS[type(op)](left, right)
            if result is None:
                result = r
            elif is_expr(result) or is_expr(r):
                result = _C.binary("and", result, r)
            else:
                result = result and r
            left = right
        return result

    def ex_NamedExpr(self, node):
        """`(t := value)`: binds t like an assignment and gives its value."""
        self.assign(node.target, self.ev(node.value), node)
        return self.ev(node.target)

    def ex_IfExp(self, node):
        cond = self.ev(node.test)
        if not is_expr(cond) or cond.kind == "IntImm":
            return self.ev(node.body if cond else node.orelse)
        return _C.select(cond, self.ev(node.body), self.ev(node.orelse))

    def ex_Call(self, node):
        fn = self.ev(node.func)
        return self.call(fn, node)

    def call(self, fn, node):
        args = self.ev_elts(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.ev(kw.value))
            else:
                kwargs[kw.arg] = self.ev(kw.value)
        self.builder.set_line(node.lineno, node.col_offset)
        if isinstance(fn, Macro):
            return fn.inline(self.builder, args, kwargs)
        try:
            return fn(*args, **kwargs)
        except TileLangError:
            raise
        except (TypeError, ValueError) as e:
            name = _describe(node.func)
            raise self.error(TileLangTypeError, f"{name}(...): {e}", node) from e

    def ev_python(self, node):
        """Anything else (comprehensions, f-strings, lambdas, dicts) is plain Python, evaluated
        with the kernel's names in scope."""
        env = dict(self.globals)
        env.update(self.closure)
        for scope in self.scopes:
            for k, v in scope.names.items():
                env[k] = _C.load(v.buffer.handle, [0]) if isinstance(v, VarRef) else v
        code = compile(ast.fix_missing_locations(ast.Expression(node)), self.file, "eval")
        return eval(code, env)  # noqa: S307 - the user's own kernel source


def _target_names(target):
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts]
    return None


def _describe(node) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover
        text = type(node).__name__
    first = text.splitlines()[0] if text else type(node).__name__
    return first if len(first) <= 60 else first[:57] + "..."


_UNSUPPORTED_HINTS = {
    "Try": "kernels cannot catch exceptions; check conditions with if",
    "FunctionDef": "define helpers outside the kernel, as Python functions or @T.macro",
    "ClassDef": "define classes outside the kernel",
    "Global": "pass values as parameters or closure variables",
    "Nonlocal": "pass values as parameters or closure variables",
    "Delete": None,
    "Raise": "use an assert on a Python value, checked at parse time",
    "Import": "import modules outside the kernel",
    "ImportFrom": "import modules outside the kernel",
}


class Macro:
    """A function whose body is inlined into the kernel that calls it (T.macro)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "macro")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args, **kwargs):
        b = _builder.current()
        if b is None:
            raise TileLangSyntaxError(f"macro '{self.__name__}' can only be called inside a kernel")
        return self.inline(b, args, kwargs)

    def inline(self, builder, args, kwargs):
        p = Parser(self.fn, builder)
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as e:
            raise _builder.error(TileLangTypeError, f"macro '{self.__name__}': {e}")
        bound.apply_defaults()
        p.scopes[0].names.update(bound.arguments)
        saved_line = builder.line
        try:
            p.visit_body(p.fdef.body)
        except _Return as r:
            return r.value
        finally:
            builder.set_line(saved_line)
        return None


def macro(fn=None, *, hygienic=True):
    """A helper whose body is inlined into the kernel that calls it, evaluated at the call."""
    if fn is None:
        return lambda f: Macro(f)
    return Macro(fn)
