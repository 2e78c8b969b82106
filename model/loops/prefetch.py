"""Software prefetch for compiled lookups into tables larger than the caches.

A token's lookup in the compiled vocabulary (:mod:`model.lexicon`) reads a slot row and
then the term's bytes, each a likely cache miss in a table of hundreds of megabytes'
reach; the lookups of a document are independent, so the loop asks for the rows of
the tokens a few places ahead while it compares the current one (LLVM's
``llvm.prefetch``: a hint, never a fault, no effect on results).
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _emit_prefetch(context, builder, array_type, array, indices) -> None:
    ary = context.make_array(array_type)(context, builder, array)
    pointer = cgutils.get_item_pointer(context, builder, array_type, ary, indices, wraparound=False)
    byte_pointer = builder.bitcast(pointer, ir.IntType(8).as_pointer())
    i32 = ir.IntType(32)
    signature = ir.FunctionType(ir.VoidType(), [byte_pointer.type, i32, i32, i32])
    function = cgutils.get_or_insert_function(builder.module, signature, "llvm.prefetch.p0")
    builder.call(function, [byte_pointer, i32(0), i32(3), i32(1)])  # read, keep in all levels, data


@intrinsic
def prefetch_row(typingctx, array, row):  # pragma: no cover - compiled
    """Ask for the cache line of ``array[row, 0]`` (a 2-D array); ``row`` must be in range."""
    if not (isinstance(array, types.Array) and array.ndim == 2 and isinstance(row, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        zero = context.get_constant(types.intp, 0)
        row_value = context.cast(builder, args[1], signature.args[1], types.intp)
        _emit_prefetch(context, builder, signature.args[0], args[0], [row_value, zero])
        return context.get_dummy_value()

    return types.void(array, row), codegen


@intrinsic
def prefetch_item(typingctx, array, index):  # pragma: no cover - compiled
    """Ask for the cache line of ``array[index]`` (a 1-D array); ``index`` must be in range."""
    if not (isinstance(array, types.Array) and array.ndim == 1 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        index_value = context.cast(builder, args[1], signature.args[1], types.intp)
        _emit_prefetch(context, builder, signature.args[0], args[0], [index_value])
        return context.get_dummy_value()

    return types.void(array, index), codegen
