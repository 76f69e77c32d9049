"""What crosses between the HumanEval solution and the harness: Python literals, one per line.

Standard library only (the sandbox's Python may be as old as 3.8): the host imports it, and
its source is prepended to the solution's first cell rather than imported there, since nothing
may be imported from the work dir. A value is sent as its ``repr`` and read back with
``ast.literal_eval`` (plus the names ``inf`` and ``nan``, which ``repr`` writes for those
floats): no object, no pickle, no callable ever crosses, so an answer cannot carry a forged
``__eq__``.

A request is ``repr((name, args, kwargs))``; an answer is ``= <repr of the result>`` or
``! <name of the exception raised>``.
"""

import ast
import threading

MAX_LINE = 1024 * 1024  # bytes in one request or answer (a parsed answer stays far below memory limits)


PARSING = threading.Lock()


class _FloatNames(ast.NodeTransformer):
    def visit_Name(self, node):
        if node.id in ("inf", "nan"):
            return ast.copy_location(ast.Constant(float(node.id)), node)
        return node


def literal(text):
    """The value of the literal ``text``; raises ValueError, SyntaxError (or MemoryError,
    RecursionError for absurd nesting) when it is anything else. One parse at a time: the
    host parses in several threads, and CPython 3.11's parser may then fail with a
    SystemError (python/cpython#106905)."""
    with PARSING:
        return ast.literal_eval(_FloatNames().visit(ast.parse(text, mode="eval")))
