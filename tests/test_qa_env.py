"""GEM's QA envs: SQuAD-normalised exact match and F1, GEM's answer formats and ids, the shipped
samples and local files as sources, a clear error for a failed download, and gem-sandbox's
fictional world, whose two-hop questions take two searches of its embedded index through the
real ``search_tool`` wrapper."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gem_sandbox_envs.hub import DatasetUnavailable
from gem_sandbox_envs.qa import DATASETS, SPECS, fictional, register_all, rules, samples
from gem_sandbox_envs.qa.corpus import corpus_index
from gem_sandbox_envs.qa.qa_env import TERMINAL_STATE, FictionalWorldEnv, QaEnv
from gem_sandbox_envs.qa.scoring import accepted_answers, exact_match, f1, normalize, score
from gem_sandbox_envs.qa.sources import data_dir, sample_name

import gem_sandbox as gem
from gem_sandbox.registry import spec
from gem_sandbox.search import SearchIndex
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns
from gem_sandbox.tools.tool_env_wrapper import ToolEnvWrapper

DATA = Path(__file__).resolve().parents[1] / "envs" / "qa" / "data"
IDS = sorted(DATASETS)
WORLD = fictional.build()


@pytest.fixture(autouse=True)
def index_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Indexes go to this test's own cache, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gem-sandbox" / "search"


def rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines()]


def sample_rows(env_id: str) -> list[dict[str, Any]]:
    dataset_name, split, _, _ = DATASETS[env_id]
    return rows(sample_name(dataset_name, split))


def wrap(env: Any, names: str = "search_tool") -> Any:
    for fn in get_wrapper_fns(names):
        env = fn(env)
    return env


# -- scoring ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  an   APPLE, a day!  ", "apple day"),
        ("Theatre of the Absurd", "theatre of absurd"),  # "the" inside a word stays
        ("U.S.A.", "usa"),
        ("", ""),
    ],
)
def test_normalisation_is_squads(text: str, normal: str):
    assert normalize(text) == normal


def test_exact_match_and_f1_on_known_answers_and_near_misses():
    assert exact_match("The Eiffel Tower", "eiffel tower") == 1.0
    assert f1("The Eiffel Tower", "eiffel tower") == 1.0
    assert exact_match("Paris, France", "Paris") == 0.0
    assert f1("Paris, France", "Paris") == pytest.approx(2 / 3)  # precision 1/2, recall 1
    assert exact_match("London", "Paris") == 0.0 and f1("London", "Paris") == 0.0
    assert f1("", "Paris") == 0.0


def test_the_best_of_several_accepted_answers_counts():
    result = score("tolle", ["River Tolle", "Tolle"])
    assert (result.em, result.f1, result.correct) == (1.0, 1.0, True)
    near = score("the Tolle river", ["River Tolle", "Tolle"])  # EM 0; F1 1 against "River Tolle"
    assert (near.em, near.f1, near.correct) == (0.0, 1.0, False)
    with pytest.raises(ValueError, match="at least one accepted answer"):
        score("x", [])


@pytest.mark.parametrize(
    ("stored", "accepted"),
    [
        ("Paris", ("Paris",)),
        (["1871", "in 1871"], ("1871", "in 1871")),
        (("a", "b"), ("a", "b")),
        (np.array(["Tolle", "River Tolle"]), ("Tolle", "River Tolle")),  # a parquet/pandas list column
        ('["Tolle", "River Tolle"]', ("Tolle", "River Tolle")),  # a JSON-encoded list
        ("[citation needed]", ("[citation needed]",)),  # brackets, but not JSON: a plain answer
        (42, ("42",)),
        (np.int64(7), ("7",)),
        (True, ("True",)),  # RuleTaker's labels, should a dataset store bools
    ],
)
def test_answers_come_as_strings_lists_arrays_or_json(stored: Any, accepted: tuple[str, ...]):
    assert accepted_answers(stored) == accepted


@pytest.mark.parametrize("stored", [None, [], ["a", None], {"text": "a"}, "  ..  "])
def test_an_answer_that_is_no_answer_is_refused(stored: Any):
    with pytest.raises(ValueError):
        accepted_answers(stored)


# -- the env: formats, rewards, info ---------------------------------------------------------


def qa_env(**kwargs: Any) -> QaEnv:
    return QaEnv(dataset=[{"question": "Where is the Eiffel Tower?", "answer": ["Paris", "Paris, France"]}], **kwargs)


def test_a_tagged_answer_is_scored_by_exact_match_with_gems_terminal_state():
    env = qa_env(seed=0)
    obs, info = env.reset()
    assert info == {} and obs.endswith("Question: Where is the Eiffel Tower?\n") and "<answer>" in obs
    right = env.step("<think>It is in France.</think> <answer>paris</answer>")
    assert right == (TERMINAL_STATE, 1.0, True, True, {"status": "ok", "correct": True, "em": 1.0, "f1": 1.0})
    env.reset()
    _, reward, _, _, info = env.step("<answer>Lyon</answer> on second thought <answer>Paris France</answer>")
    assert reward == 1.0 and info["correct"]  # the last tag counts; punctuation is not
    env.reset()
    _, reward, _, _, info = env.step("<answer>Paris, Texas</answer>")
    assert reward == 0.0 and info["status"] == "ok" and not info["correct"]
    assert info["em"] == 0.0 and info["f1"] == pytest.approx(2 / 3)  # best F1: against "Paris"


@pytest.mark.parametrize("action", ["Paris", "\\boxed{Paris}", "<answer>  </answer>", "<answer>Paris"])
def test_no_answer_tag_is_a_format_error_scored_zero(action: str):
    env = qa_env()
    env.reset()
    info = {"status": "format_error", "correct": False, "em": 0.0, "f1": 0.0}
    assert env.step(action) == (TERMINAL_STATE, 0.0, True, True, info)


def test_extract_boxed_reads_the_last_box_as_ruletaker_ids_do():
    env = QaEnv(dataset=[{"question": "Is the cat red?", "answer": "True"}], extract_boxed=True)
    obs, _ = env.reset()
    assert "\\boxed{}" in obs and "<answer>" not in obs
    assert env.step("It follows. \\boxed{False} no, \\boxed{True}")[1:3] == (1.0, True)
    env.reset()
    assert env.step("\\boxed{false}")[1] == 0.0
    env.reset()
    assert env.step("<answer>True</answer>")[4]["status"] == "format_error"  # tags do not count here


def test_reset_serves_each_question_once_an_epoch_and_by_seed_or_index():
    data = [{"question": f"Q{i}?", "answer": str(i)} for i in range(5)]
    env = QaEnv(dataset=data, seed=1)
    epoch = {env.reset()[0] for _ in range(5)}
    assert len(epoch) == 5
    assert QaEnv(dataset=data).reset(seed=3) == QaEnv(dataset=data).reset(seed=3)
    assert env.reset(idx=2)[0].endswith("Question: Q2?\n") and env.answers == ("2",)
    with pytest.raises(IndexError, match="out of range"):
        env.reset(idx=5)


def test_state_copies_and_spawns_share_the_questions():
    env = qa_env(seed=0)
    env.reset()
    clone = env.spawn(same_state=True)
    assert clone.questions is env.questions and clone.step("<answer>Paris</answer>")[1] == 1.0
    assert env.step("<answer>Rome</answer>")[1] == 0.0


# -- GEM's ids from their samples ------------------------------------------------------------


def test_the_ids_and_settings_are_gems():
    """Same ids, dataset names, splits and keys as gem-llm registers for its QaEnv."""
    pytest.importorskip("gem.envs", reason="gem-llm is not installed")
    from gem.envs.registration import ENV_REGISTRY as GEMS

    gems = {i: s for i, s in GEMS.items() if s.entry_point == "gem.envs.qa_env:QaEnv"}
    assert set(gems) == set(DATASETS)
    register_all()
    register_all()  # idempotent
    for env_id in DATASETS:
        assert spec(env_id).kwargs == gems[env_id].kwargs, env_id


def test_the_listing_names_each_source():
    register_all()
    assert spec("eval:TriviaQA").source() == "download: axon-rl/search-eval (split tq)"
    assert spec("logic:RuleTaker-d2").source() == "download: axon-rl/RuleTaker-d2-70k (split train)"
    assert spec("qa:FictionalWorld-v0").source() == "shipped: gem-sandbox's fictional world"
    assert QaEnv.describe_source(dataset_name="axon-rl/HotpotQA", sample=True) == "shipped sample"
    assert QaEnv.describe_source(data_path="/d/x.jsonl") == "local file /d/x.jsonl"


@pytest.mark.parametrize("env_id", IDS)
def test_every_id_serves_its_sample_and_scores_right_and_wrong_answers(env_id: str):
    _, _, question_key, boxed = DATASETS[env_id]
    expected = sample_rows(env_id)
    assert 5 <= len(expected) <= 10
    env = gem.make(env_id, sample=True, seed=0)
    assert isinstance(env, QaEnv) and env.source == "shipped sample" and len(env.questions) == len(expected)
    for idx, row in enumerate(expected):
        obs, info = env.reset(idx=idx)
        assert obs.endswith(f"Question: {row[question_key]}\n") and info == {}
        answer = row["answer"] if isinstance(row["answer"], str) else row["answer"][0]
        right = f"\\boxed{{{answer}}}" if boxed else f"<think>...</think><answer>{answer}</answer>"
        wrong = "\\boxed{Maybe}" if boxed else "<answer>Atlantis</answer>"
        assert env.step(right)[:4] == (TERMINAL_STATE, 1.0, True, True)
        env.reset(idx=idx)
        obs, reward, terminated, truncated, info = env.step(wrong)
        assert (obs, reward, terminated, truncated, info["status"], info["correct"]) == (
            TERMINAL_STATE, 0.0, True, True, "ok", False
        )  # fmt: skip


def test_data_path_serves_a_local_jsonl_with_the_ids_keys(tmp_path: Path):
    path = tmp_path / "mine.jsonl"
    lines = [{"problem": "Who wrote Hamlet?", "answer": ["William Shakespeare", "Shakespeare"]}]
    path.write_text("".join(json.dumps(row) + "\n" for row in lines), encoding="utf-8")
    env = gem.make("qa:HotpotQA", data_path=path)
    assert env.source == f"local file {path}" and env.search_index is None  # no corpus of its own
    env.reset()
    assert env.step("<answer>shakespeare</answer>")[1] == 1.0
    with pytest.raises(ValueError, match="line 1: no 'question' field"):
        gem.make("eval:Bamboogle", data_path=path)  # its key is "question"
    with pytest.raises(ValueError, match="not both"):
        gem.make("qa:HotpotQA", data_path=path, sample=True)


def test_data_path_serves_parquet_lists(tmp_path: Path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "open.parquet"
    pq.write_table(pa.table({"question": ["Who?"], "answer": [["Ada Lovelace", "Lovelace"]]}), path)
    env = gem.make("eval:QaOpen", data_path=path)
    env.reset()
    assert env.step("<answer>Lovelace</answer>")[1] == 1.0


def test_no_sample_for_another_dataset_and_no_source_at_all_are_refused():
    with pytest.raises(ValueError, match="no sample is shipped for Other.train; the samples: HotpotQA"):
        QaEnv(dataset_name="someone/Other", split="train", sample=True)
    with pytest.raises(ValueError, match="no questions to serve"):
        QaEnv()
    with pytest.raises(ValueError, match="not two"):
        QaEnv(dataset=[{"question": "q", "answer": "a"}], sample=True)


def test_without_the_datasets_package_a_download_says_how_to_run_offline(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ModuleNotFoundError
    with pytest.raises(DatasetUnavailable, match="needs the datasets package.*sample=True for the shipped sample"):
        gem.make("eval:Musique")


OFFLINE_SCRIPT = """
import gem_sandbox as gem
gem.make("eval:2Wiki")
"""


def test_an_offline_download_fails_with_one_clear_error(tmp_path: Path):
    """Offline with nothing cached: one DatasetUnavailable naming the dataset and the offline
    sources, no traceback from inside ``datasets``. (A fresh process, as HF reads these
    variables on import.)"""
    pytest.importorskip("datasets")
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", OFFLINE_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "gem_sandbox_envs.hub.DatasetUnavailable: cannot load GEM's dataset axon-rl/search-eval (split 2wiki)"
    )
    assert "pass data_path= a local .jsonl or .parquet file with 'question'" in last and "sample=True" in last
    assert "site-packages/datasets" not in run.stderr


# -- the shipped data ------------------------------------------------------------------------


def test_the_shipped_files_are_what_the_generators_make():
    made = samples.shipped_files()
    shipped = {p.name for p in DATA.iterdir() if p.name != "README"}
    assert shipped == set(made)
    for name, text in made.items():
        assert (DATA / name).read_text(encoding="utf-8") == text, f"{name} is stale: run samples.write()"
    assert data_dir() == DATA  # the package reads the repo's files in the editable install


_FACT = re.compile(r"The (\w+) is (\w+)\.$")
_RULE = re.compile(r"If something is (\w+(?: and \w+)*) then it is (\w+)\.$")


def layered_closure(theory: str) -> dict[tuple[str, str], int]:
    """An independent check of the labels: parse the theory back from its text and apply every
    rule to the facts known so far, one layer at a time; a fact's depth is its first layer."""
    facts, rule_list = set(), []
    for sentence in re.findall(r"[^.]+\.", theory):
        sentence = sentence.strip()
        if m := _FACT.match(sentence):
            facts.add((m[1], m[2]))
        elif m := _RULE.match(sentence):
            rule_list.append((m[1].split(" and "), m[2]))
        else:
            raise AssertionError(f"unparsed sentence {sentence!r}")
    layer, known = 0, {fact: 0 for fact in facts}
    entities = {e for e, _ in facts}
    while True:
        layer += 1
        new = {
            (e, conclusion)
            for premises, conclusion in rule_list
            for e in entities
            if all((e, p) in known for p in premises) and (e, conclusion) not in known
        }
        if not new:
            return known
        known.update(dict.fromkeys(new, layer))


@pytest.mark.parametrize("depth", samples.RULETAKER_DEPTHS)
def test_ruletaker_labels_and_depths_are_right(depth: int):
    found = rows(f"RuleTaker-d{depth}-70k.train.jsonl")
    assert {row["depth"] for row in found} == set(range(depth + 1))
    assert {row["answer"] for row in found} == {"True", "False"}
    for row in found:
        theory, _, asked = row["question"].partition("\n\n")
        statement = asked.splitlines()[-1]
        m = re.fullmatch(r"The (\w+) is (not )?(\w+)\.", statement)
        assert m, statement
        known = layered_closure(theory)
        holds = (m[1], m[3]) in known
        assert row["answer"] == str(holds != bool(m[2])), row
        assert known[(m[1], m[3])] == row["depth"]
    assert rules.depths({("cat", "red")}, [rules.Rule(("red",), "big")]) == {("cat", "red"): 0, ("cat", "big"): 1}


def test_the_world_is_unambiguous_and_two_hop_answers_are_only_in_the_second_document():
    docs = fictional.documents(WORLD)
    titles = [title for title, _ in docs]
    assert len(set(titles)) == len(titles) and 150 <= len(docs) <= 400
    qs = fictional.questions(WORLD)
    assert {q["hops"] for q in qs} == {1, 2} and sum(q["hops"] == 2 for q in qs) >= 100
    assert len({q["question"] for q in qs}) == len(qs)
    for q in qs:
        accepted = q["answer"] if isinstance(q["answer"], list) else [q["answer"]]
        texts = [f"{docs[int(i)][0]}\n{docs[int(i)][1]}" for i in q["docs"]]
        assert not any(fictional.mentions(q["question"], a) for a in accepted), q
        assert any(fictional.mentions(texts[-1], a) for a in accepted), q
        if q["hops"] == 2:
            assert not any(fictional.mentions(texts[0], a) for a in accepted), q
            bridge = docs[int(q["docs"][1])][0]
            assert fictional.mentions(texts[0], bridge) and not fictional.mentions(q["question"], bridge), q


def test_the_world_is_made_the_same_every_time():
    assert fictional.build() == WORLD and fictional.build(seed=1) != WORLD


# -- the world's corpus in the embedded index ------------------------------------------------


def test_the_index_is_built_once_into_the_cache_and_rebuilt_for_a_changed_corpus(index_cache: Path, tmp_path: Path):
    env = FictionalWorldEnv()
    first = env.search_index
    assert first is not None and first.parent == index_cache and first.name.startswith("fictional-world.corpus-")
    mtime = first.stat().st_mtime_ns
    assert FictionalWorldEnv(hops=2).search_index == first and first.stat().st_mtime_ns == mtime
    assert [p.name for p in index_cache.iterdir()] == [first.name]  # no build left behind
    with contextlib.closing(sqlite3.connect(first)) as db:
        assert db.execute("SELECT count(*) FROM docs").fetchone() == (len(fictional.documents(WORLD)),)
    corpus = tmp_path / "mine.jsonl"
    corpus.write_text(json.dumps({"id": "1", "contents": "Tolle\nA river."}) + "\n", encoding="utf-8")
    assert corpus_index(corpus) != first and corpus_index(corpus) == corpus_index(corpus)


def test_the_search_finds_each_hop_of_every_founder_question():
    """BM25 over the world: the company's name finds its document first; the founder's name,
    which only that document gives, finds the founder's document among the top 3."""
    people = {p.name: p for p in WORLD.people}
    with SearchIndex(FictionalWorldEnv().search_index) as index:
        for company in WORLD.companies:
            assert index.search(f"founder of {company.name}", 3)[0].title == company.name
            hits = index.search(company.founder, 3)
            assert company.founder in [h.title for h in hits]
            assert any(fictional.mentions(h.text, people[company.founder].birthplace) for h in hits)


def founder_question() -> tuple[dict[str, Any], fictional.Company]:
    """The first founder two-hop question whose first search shows the founder's name and not
    the answer (other companies' documents in that search name other towns)."""
    people = {p.name: p for p in WORLD.people}
    with SearchIndex(FictionalWorldEnv().search_index) as index:
        for company in WORLD.companies:
            first = " ".join(h.text for h in index.search(f"founder of {company.name}", 3))
            if not fictional.mentions(first, people[company.founder].birthplace):
                break
        else:
            raise AssertionError("every founder question's first search shows its answer")
    asked = f"In which town was the founder of {company.name} born?"
    return next(q for q in fictional.questions(WORLD) if q["question"] == asked), company


def test_a_two_hop_question_takes_two_searches_through_the_search_tool_wrapper(monkeypatch: pytest.MonkeyPatch):
    # A server the env's own corpus must win over: a general index knows nothing of this world.
    monkeypatch.setenv("SEARCH_URL", "http://127.0.0.1:9/retrieve")
    question, company = founder_question()
    answer = question["answer"]
    env = wrap(gem.make("qa:FictionalWorld-2hop-v0", seed=0))
    assert isinstance(env, ToolEnvWrapper)
    idx = next(i for i, q in enumerate(env.unwrapped.questions.questions) if q == question["question"])
    obs, info = env.reset(idx=idx)
    assert question["question"] in obs and "<search>" in obs
    assert not fictional.mentions(obs, answer) and not fictional.mentions(obs, company.founder)

    first_search = f"<think>Who founded it?</think> <search>founder of {company.name}</search>"
    hop1, reward, terminated, _, info = env.step(first_search)
    assert info["use_tool"] and not terminated and reward == pytest.approx(0.3)
    assert hop1.startswith(f"\n\n<information>Doc 1(Title: {company.name}) ")
    assert fictional.mentions(hop1, company.founder) and not fictional.mentions(hop1, answer)

    hop2, reward, terminated, _, info = env.step(f"<search>{company.founder}</search>")
    assert info["use_tool"] and info["tool_success_counter"] == 2 and not terminated
    assert fictional.mentions(hop2, answer)

    final = env.step(f"<think>{company.founder} was born there.</think><answer>{answer}</answer>")
    assert final[:4] == (TERMINAL_STATE, 1.0, True, True) and final[4]["status"] == "ok"
    env.close()


def test_samples_of_gems_qa_ids_carry_the_world_and_others_search_the_server(monkeypatch: pytest.MonkeyPatch):
    env = gem.make("qa:HotpotQA", sample=True)
    assert env.search_index == FictionalWorldEnv().search_index  # its questions are about the world
    env = wrap(env, "search_tool_no_int_reward")
    env.reset(idx=0)
    obs, reward, _, _, info = env.step(f"<search>{WORLD.companies[0].name}</search>")
    assert obs.startswith(f"\n\n<information>Doc 1(Title: {WORLD.companies[0].name}) ")
    assert reward == 0.0 and info["tool_success_counter"] == 1
    env.close()

    monkeypatch.setenv("SEARCH_URL", "http://127.0.0.1:9/retrieve")  # nothing listens there
    logic = gem.make("logic:RuleTaker-d1", sample=True)
    assert logic.search_index is None
    logic = wrap(logic)
    logic.reset(idx=0)
    obs, _, _, _, info = logic.step("<search>cats</search>")
    assert "[SearchTool Error: " in obs and info["tool_success_counter"] == 0  # it went to $SEARCH_URL
    logic.close()


def test_fictional_world_hops_select_questions():
    both, two = FictionalWorldEnv(), gem.make("qa:FictionalWorld-2hop-v0")
    assert len(both.questions) == len(fictional.questions(WORLD)) > len(two.questions)
    assert {q["hops"] for q in fictional.questions(WORLD)} == {1, 2}
    assert all("Question: " in both.reset()[0] for _ in range(3))
    with pytest.raises(ValueError, match="hops is 1, 2 or None"):
        FictionalWorldEnv(hops=3)
    own = [s.id for s in SPECS if s.id.startswith("qa:Fictional")]
    assert own == ["qa:FictionalWorld-v0", "qa:FictionalWorld-2hop-v0"]


class Columns:
    """What QaEnv reads of a ``datasets.Dataset``: ``column_names`` and ``dataset[column]``."""

    def __init__(self, **columns: list[Any]) -> None:
        self.columns = columns
        self.column_names = list(columns)

    def __getitem__(self, name: str) -> list[Any]:
        return self.columns[name]


def test_a_given_dataset_or_dataset_dict_and_corpus_are_served(tmp_path: Path):
    train = Columns(question=["Which river?"], answer=[["River Tolle", "Tolle"]])
    splits = {"train": train, "test": Columns(question=["Who?"], answer=["Nobody"])}
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "1", "contents": "Tolle\nThe river Tolle."}) + "\n", encoding="utf-8")
    env = QaEnv(dataset=splits, split="train", corpus=corpus)
    assert env.source == "given dataset" and env.search_index == corpus_index(corpus)
    env.reset()
    assert env.step("<answer>Tolle</answer>")[1] == 1.0
    assert QaEnv(dataset=train).questions.answers == (("River Tolle", "Tolle"),)
    with pytest.raises(ValueError, match="several splits"):
        QaEnv(dataset=splits)
    with pytest.raises(FileNotFoundError, match="no corpus file"):
        QaEnv(dataset=train, corpus=tmp_path / "none.jsonl")
