"""A calculator tool: arithmetic without a sandbox, evaluated over a whitelisted AST.

It exists so that tool-using envs and the tool wrapper can be exercised by a real tool that
needs no sandbox; the sandboxed Python tool follows the same contract.
"""

from __future__ import annotations

import ast
import operator
import re
from typing import Any, ClassVar

from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput, one_string_argument
from gem_sandbox.tools.episode import Episode

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_EXPONENT = 1000  # keeps 9**9**9 from stalling the event loop
_PATTERN = re.compile(r"<calculator>(.*?)</calculator>", re.DOTALL)


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression; ValueError for anything else."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
                raise ValueError(f"exponent {right} is too large")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        raise ValueError(f"unsupported expression element: {ast.dump(node)[:40]}")

    try:
        return ev(ast.parse(expression.strip(), mode="eval").body)
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {exc.msg}") from None
    except (ZeroDivisionError, OverflowError) as exc:
        raise ValueError(str(exc)) from None


class CalculatorTool(Tool):
    name: ClassVar[str] = "calculator"
    tool_type: ClassVar[str] = "calculator"
    description: ClassVar[str] = "Evaluate an arithmetic expression (+ - * / // % ** and parentheses)."
    parameters: ClassVar[dict[str, Any]] = one_string_argument("expression", "e.g. (3 + 4) * 2")

    def instruction_string(self) -> str:
        return (
            "You can evaluate arithmetic by writing <calculator>expression</calculator>; "
            'the value is returned after "Calculator result: ". '
            "Return your final answer within \\boxed{}."
        )

    def parse(self, action: str) -> ToolCall | None:
        match = _PATTERN.search(action)
        if match is None:
            return None
        return ToolCall(self.name, {"expression": match.group(1)}, action[: match.end()], match.end())

    async def aexecute(self, call: ToolCall, episode: Episode | None = None) -> ToolOutput:
        try:
            value = evaluate(call.arguments["expression"])
        except ValueError as exc:
            return ToolOutput(f"Calculator error: {exc}\n", error=True)
        return ToolOutput(f"Calculator result: {value}\n")
