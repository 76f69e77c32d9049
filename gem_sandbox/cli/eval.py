"""``gem-sandbox eval``: a model behind an OpenAI-compatible endpoint played on a catalogue env,
with a progress bar, a summary table and, optionally, every transcript as JSON lines."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gem_sandbox.cli.args import pair, positive_int
from gem_sandbox.sandbox.defaults import BACKEND_CHOICES


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "eval",
        help="play an env with a model behind an OpenAI-compatible /v1/chat/completions; report mean reward and pass@k",
    )
    p.add_argument("env_id", metavar="ENV_ID", help="a catalogue id, e.g. math:Arithmetic-v0 (see `gem-sandbox envs`)")
    p.add_argument("--model", required=True, metavar="URL", help="the endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model-name", help="the model to ask for (default: the first the endpoint's /models lists)")
    p.add_argument("--api-key", help="sent as a Bearer token")
    p.add_argument("--wrappers", default="", help="GEM wrapper names applied in order, e.g. python_tool")
    p.add_argument("--episodes", type=positive_int, default=10, help="tasks, seeds SEED, SEED+1, ... (default 10)")
    p.add_argument("--samples", type=positive_int, default=1, help="samples per task, for pass@k (default 1)")
    p.add_argument("--concurrency", type=positive_int, default=4, help="episodes at once (default 4)")
    p.add_argument("--seed", type=int, default=0, help="the first task's seed (default 0)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    p.add_argument("--max-tokens", type=positive_int, help="tokens per reply (default: the endpoint's)")
    p.add_argument("--max-turns", type=positive_int, default=32, help="model replies per episode at most (default 32)")
    p.add_argument("--output", metavar="FILE.jsonl", help="write each episode's transcript, one JSON object a line")
    p.add_argument("--backend", choices=BACKEND_CHOICES, help="the sandbox backend (default: configured or auto)")
    p.add_argument(
        "--env-option", action="append", default=[], metavar="NAME=VALUE", help="a keyword for the env (a JSON value or text); repeat"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_eval)


def _eval(args: argparse.Namespace) -> int:
    import anyio
    from tqdm import tqdm

    from gem_sandbox import evaluation
    from gem_sandbox.runtime import Runtime

    config = evaluation.EvalConfig(
        env_id=args.env_id,
        model_url=args.model,
        model_name=args.model_name,
        api_key=args.api_key,
        wrappers=args.wrappers,
        episodes=args.episodes,
        samples=args.samples,
        concurrency=args.concurrency,
        seed=args.seed,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        max_turns=args.max_turns,
        env_kwargs=_values(args.env_option),
    )
    output = open(args.output, "w", encoding="utf-8") if args.output else None  # noqa: SIM115 (closed below)
    bars: list[tqdm[Any]] = []  # shown once the run is found good, so an error stays one line

    def ready() -> None:
        bars.append(tqdm(total=config.episodes * config.samples, unit="episode", disable=args.no_progress, file=sys.stderr))

    def done(record: evaluation.EpisodeRecord) -> None:
        if output is not None:
            output.write(record.to_json() + "\n")
            output.flush()
        bars[0].update()

    async def run() -> list[evaluation.EpisodeRecord]:
        async with Runtime(args.backend) as runtime:
            return await evaluation.evaluate(config, runtime=runtime, on_ready=ready, on_episode=done)

    try:
        records = anyio.run(run)
    finally:
        for bar in bars:
            bar.close()
        if output is not None:
            output.close()
    print(evaluation.summarize(records, config.samples).table())
    return 0


def _values(texts: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs, each value read as JSON (``true``, ``5``) or else as text."""
    import json

    values: dict[str, Any] = {}
    for text in texts:
        name, raw = pair(text, "--env-option")
        try:
            values[name] = json.loads(raw)
        except json.JSONDecodeError:
            values[name] = raw
    return values
