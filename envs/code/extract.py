"""The code in a model's answer: the last fenced block, as GEM's code envs read it.

A block is ```` ```lang ```` (any tag, or none) ending its line, the code, then ```` ``` ````.
Only the fences and blank lines around the code are removed: a HumanEval answer may be an
indented function body, whose first line's indentation matters (GEM strips it, which breaks
such bodies).
"""

from __future__ import annotations

import re

_BLOCK = re.compile(r"```[\w+#.-]*[ \t]*\n(.*?)```", re.DOTALL)


def last_code_block(answer: str) -> str | None:
    """The last fenced block's code; None when there is no block or it holds only
    whitespace (there is nothing to run)."""
    blocks = _BLOCK.findall(answer)
    if not blocks or not blocks[-1].strip():
        return None
    lines = blocks[-1].rstrip().split("\n")
    while not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)
