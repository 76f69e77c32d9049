"""verl + gem-sandbox: a math dataset, the sandboxed Python tool and the reward function.

Run it (with verl installed: ``pip install verl 'gem-sandbox[math,service]'``)::

    GEM_SANDBOX_BACKEND=local python examples/verl_gem_sandbox.py /tmp/verl_data

It writes ``/tmp/verl_data/train.parquet`` and ``val.parquet``, calls the tool as verl's agent
loop does and scores a right and a wrong answer. Then train with verl's own entry point::

    python -m verl.trainer.main_ppo \\
        data.train_files=/tmp/verl_data/train.parquet data.val_files=/tmp/verl_data/val.parquet \\
        actor_rollout_ref.rollout.multi_turn.enable=true \\
        actor_rollout_ref.rollout.multi_turn.tool_config_path=examples/verl_tool_config.yaml \\
        actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent \\
        custom_reward_function.path=$(python -c 'import gem_sandbox.integrations.verl as m; print(m.__file__)') \\
        custom_reward_function.name=compute_score \\
        ...  # the model, rollout engine and trainer settings of your run

Or let the env play the episode (its observations as user turns, its rewards as the score):
write the rows with ``dataset_rows(..., agent_name="gem_sandbox_python")`` and pass
``actor_rollout_ref.rollout.agent.agent_loop_config_path=examples/verl_agent_loop.yaml``.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

from gem_sandbox.integrations.verl import (
    SandboxPythonTool,
    compute_score,
    dataset_rows,
    write_parquet,
)

ENV_ID = "math:Arithmetic-v0"


async def call_tool(code: str) -> str:
    """One tool call with verl's lifecycle: create, execute, release."""
    tool = SandboxPythonTool({"type": "native", "timeout": 5}, None)
    instance_id, _ = await tool.create()
    try:
        response, _, _ = await tool.execute(instance_id, {"code": code})
    finally:
        await tool.release(instance_id)
    return (response.text or "").strip()


def main(out_dir: str) -> dict[str, object]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(str(out / "train.parquet"), dataset_rows(ENV_ID, 64, seed=0, tools=["python"]))
    val = dataset_rows(ENV_ID, 8, seed=10_000, split="test", tools=["python"])
    write_parquet(str(out / "val.parquet"), val)

    tool_text = asyncio.run(call_tool("print(2 ** 10)"))
    # A "model" that multiplies with the tool: products are what the tool computes exactly.
    product = next(r for r in dataset_rows(ENV_ID, 50, seed=0) if "multiplied by" in r["prompt"][0]["content"])
    a, b = map(int, re.findall(r"(\d+) multiplied by (\d+)", product["prompt"][0]["content"])[0])
    answer = asyncio.run(call_tool(f"print({a} * {b})")).split()[-1]
    seed = product["reward_model"]["ground_truth"]
    report = {
        "tool": tool_text,
        "right": compute_score(ENV_ID, f"\\boxed{{{answer}}}", seed)["score"],
        "wrong": compute_score(ENV_ID, "\\boxed{0}", seed)["score"],
    }
    print(report)
    return report


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "verl_data")
