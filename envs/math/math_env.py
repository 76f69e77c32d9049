"""GEM's math envs: a dataset's problems, one per single-turn episode, answers checked by math-verify.

What the model sees is GEM's: the question as the dataset words it (the chat template or the
tool wrapper adds any instructions), then GEM's terminal observation. The answer is the last
``\\boxed{}`` of the action; reward 1.0 when math-verify finds it equivalent to one of the
problem's accepted answers (``\\frac{1}{2}``, ``0.5`` and ``1/2`` alike), else 0.

``info["status"]`` says how the answer fared: ``"ok"`` it was extracted and checked
(``info["correct"]`` tells which way), ``"format_error"`` no (non-empty) ``\\boxed{}``,
``"timeout"`` the check did not finish within ``check_timeout`` seconds, or its worker died
(scored 0, as GEM scores a check that times out).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from gem_sandbox_envs.math.answer_check import CHECK_TIMEOUT, default_checker
from gem_sandbox_envs.math.arithmetic import TERMINAL_STATE
from gem_sandbox_envs.gem_options import refuse_unknown
from gem_sandbox_envs.math.sources import SOURCE, StrPath
from gem_sandbox_envs.rows import QuestionEnv

from gem_sandbox.core import ResetReturn, StepReturn
from gem_sandbox.utils.parsing import last_boxed_answer


class MathEnv(QuestionEnv):
    """Serves a dataset's problems: each once per epoch in an order shuffled by ``self.rng``;
    ``reset(seed=s)`` draws one by seed, ``reset(idx=i)`` serves the source's ``i``-th.

    ``dataset_name``, ``split``, ``question_key`` and ``answer_key`` are GEM's (the registered
    ids set them); ``data_path`` or ``sample`` choose another source (see :mod:`.sources`), or
    ``dataset`` gives the rows themselves (as GEM's ``dataset=``: a ``datasets.Dataset``, or a
    list of dicts). The arguments up to ``use_mp`` are GEM's, in GEM's order. ``use_mp`` and
    the other names GEM's envs take (``max_turns``, ``verbose``...) are accepted and ignored:
    the answer is always checked in a worker process, so that a check that hangs can be cut at
    ``check_timeout``.
    """

    blocking = True  # a step waits for the checker process

    def __init__(
        self,
        dataset_name: str = "",
        split: str | None = None,
        dataset: Any = None,
        question_key: str = "problem",
        answer_key: str = "answer",
        seed: int | None = None,
        use_mp: bool = True,
        *,
        data_path: StrPath | None = None,
        sample: bool = False,
        check_timeout: float = CHECK_TIMEOUT,
        **gem_options: Any,
    ) -> None:
        refuse_unknown(type(self), gem_options)
        if importlib.util.find_spec("math_verify") is None:
            raise ModuleNotFoundError(
                "math envs check answers with math-verify: pip install 'gem-sandbox[math]'", name="math_verify"
            )
        source = self.describe_source(
            dataset_name=dataset_name, split=split, data_path=data_path, sample=sample, dataset=dataset
        )
        super().__init__(seed, source, "problem")
        self.problems = SOURCE.load(dataset_name, split, data_path, sample, question_key, answer_key, dataset)
        self.check_timeout = check_timeout

    def reset(self, seed: int | None = None, idx: int | None = None, **kwargs: Any) -> ResetReturn:
        return self.ask(seed, idx, self.problems), {}

    def step(self, action: str) -> StepReturn:
        answer = last_boxed_answer(action)
        if answer is None or not answer.strip():
            return TERMINAL_STATE, 0.0, True, True, {"correct": False, "status": "format_error"}
        verdict = default_checker().check(answer, self.answers, self.check_timeout)
        info = {"correct": bool(verdict), "status": "timeout" if verdict is None else "ok"}
        return TERMINAL_STATE, 1.0 if verdict else 0.0, True, True, info

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(0, 100)}}}"
