"""stdin/stdout code envs in every language the agent serves, on the shipped polyglot sample.

Each language's reference solutions score 1.0 on their five problems and 0 on another's.
Languages the bubblewrap sandbox serves (those on this host) run there; the rest run on
Docker with the polyglot image (``gem-sandbox images build --profile polyglot``), and skip,
saying so, where it is not built.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from gem_sandbox_envs.code.stdio import LANGUAGES, POLYGLOT_SAMPLE, CodeEnv

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.backends.base import Backend
from gem_sandbox.sandbox.errors import UnsupportedLanguage
from gem_sandbox.sandbox.pool import PoolConfig
from tests.docker_fixtures import docker_sdk
from tests.sandbox_fixtures import make_backend

pytestmark = pytest.mark.anyio

TASKS = [json.loads(line) for line in open(POLYGLOT_SAMPLE, encoding="utf-8")]
# A cold JVM compiler on a loaded machine takes seconds, and a JVM hundreds of MB: two at once.
SLOW = {"timeout": 60.0, "compile_timeout": 120.0, "max_parallel": 2}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class Runtimes:
    """The bubblewrap runtime and the polyglot one (None, with why, where it cannot run)."""

    def __init__(self, local: Runtime, served: list[str], polyglot: Runtime | None, why_not: str) -> None:
        self.local, self.served, self.polyglot, self.why_not = local, served, polyglot, why_not

    def serving(self, language: str) -> Runtime:
        if language in self.served:
            return self.local
        if self.polyglot is None:
            pytest.skip(f"{language} is not on this host and {self.why_not}")
        return self.polyglot


def polyglot_backend() -> tuple[Backend | None, str]:
    docker_sdk()
    from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions, images

    problem = DockerBackend.check()
    if problem:
        return None, f"Docker cannot run here: {problem}"
    image = images.default_image("polyglot")
    if image is None:
        return None, "the polyglot image is not built: gem-sandbox images build --profile polyglot"
    return DockerBackend(DockerOptions(image=image)), ""


@pytest.fixture(scope="module")
async def runtimes() -> AsyncIterator[Runtimes]:
    local_backend = make_backend("local")
    docker_backend, why_not = polyglot_backend()
    async with AsyncExitStack() as stack:
        local = await stack.enter_async_context(Runtime(local_backend, PoolConfig(min_idle=0, max_size=4)))
        async with local.lease() as sandbox:
            served = sandbox.hello["languages"]
        polyglot = None
        if docker_backend is not None:
            runtime = Runtime(docker_backend, min_idle=0, max_size=2, memory_mb=2048)  # JVMs need room
            polyglot = await stack.enter_async_context(runtime)
        yield Runtimes(local, served, polyglot, why_not)
    for backend in (local_backend, docker_backend):
        if backend is not None:
            await backend.aclose()


def test_every_stdin_language_has_a_reference_solution_to_every_problem():
    assert len(TASKS) == 5
    for task in TASKS:
        assert set(task["solutions"]) == set(LANGUAGES), task["name"]


@pytest.mark.parametrize("language", sorted(LANGUAGES))
async def test_every_reference_solution_scores_one(language: str, runtimes: Runtimes):
    env = CodeEnv(data_path=POLYGLOT_SAMPLE, language=language, runtime=runtimes.serving(language), **SLOW)
    outcomes = await env.ascore_many([(fenced(task["solutions"][language], language), task) for task in TASKS])
    assert {task["name"]: o.category.value for task, o in zip(TASKS, outcomes)} == {t["name"]: "ok" for t in TASKS}
    assert [env.reward_of(o) for o in outcomes] == [1.0] * len(TASKS)


@pytest.mark.parametrize("language", sorted(LANGUAGES))
async def test_a_solution_to_another_problem_scores_zero(language: str, runtimes: Runtimes):
    env = CodeEnv(data_path=POLYGLOT_SAMPLE, language=language, runtime=runtimes.serving(language), **SLOW)
    shifted = [(fenced(TASKS[i - 1]["solutions"][language], language), task) for i, task in enumerate(TASKS)]
    outcomes = await env.ascore_many(shifted)
    assert [env.reward_of(o) for o in outcomes] == [0.0] * len(TASKS), outcomes
    assert all(o.category.value in ("wrong_answer", "error") for o in outcomes), outcomes


def test_the_prompt_names_the_language_past_python():
    sum_task = TASKS[0]
    assert CodeEnv(data_path=POLYGLOT_SAMPLE).prompt(sum_task) == sum_task["problem"]  # GEM's prompt
    assert CodeEnv(data_path=POLYGLOT_SAMPLE, language="rust").prompt(sum_task).endswith(
        "Write the program in Rust: it reads standard input and writes standard output."
    )


def test_a_language_the_agent_does_not_serve_as_a_program_is_refused():
    with pytest.raises(ValueError, match="language must be one of python, cpp"):
        CodeEnv(data_path=POLYGLOT_SAMPLE, language="junit")


async def test_a_language_the_sandbox_lacks_is_refused_not_scored(runtimes: Runtimes):
    missing = next(language for language in LANGUAGES if language not in runtimes.served)
    env = CodeEnv(data_path=POLYGLOT_SAMPLE, language=missing, runtime=runtimes.local)
    with pytest.raises(UnsupportedLanguage, match="polyglot image"):
        await env.ascore(TASKS[0]["solutions"][missing], TASKS[0])


def fenced(code: str, language: str) -> str:
    return f"My solution:\n```{language}\n{code}\n```\n"
