"""The grid games (Sokoban, Crosswords, WordSearch): levels that can be won, and scripted wins.

The rules every game shares (random play, seeding, set_state, the async face, format errors)
are checked for these games too by the parametrized tests of ``test_games.py``.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

import gem_sandbox_envs.games.crosswords as crosswords
from gem_sandbox.core import Env
from gem_sandbox.registry import make
from gem_sandbox_envs.games import lines, register_all, word_search
from gem_sandbox_envs.games.base import GameReward
from gem_sandbox_envs.games.crosswords import clue_list
from gem_sandbox_envs.games.sokoban import MOVES
from gem_sandbox_envs.games.words import word_list

register_all()

Cell = tuple[int, int]


def play(env: Env, actions: Iterable[str], seed: int | None = None) -> list[tuple[Any, ...]]:
    """Play ``actions`` from a reset (``seed``) or from where ``env`` is; the steps taken."""
    if seed is not None:
        env.reset(seed=seed)
    steps = []
    for action in actions:
        steps.append(env.step(action))
        if steps[-1][2] or steps[-1][3]:
            break
    return steps


def assert_won(steps: list[tuple[Any, ...]]) -> None:
    obs, _, terminated, truncated, _ = steps[-1]
    assert terminated and not truncated and "Congratulations" in obs, obs
    assert sum(step[1] for step in steps) == pytest.approx(GameReward.SUCCESS)


def assert_invalid(step: tuple[Any, ...], text: str) -> None:
    obs, reward, terminated, truncated, _ = step
    assert (reward, terminated, truncated) == (GameReward.INVALID_ACTION, False, False)
    assert text in obs


def assert_format_error(env: Env, action: str) -> None:
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(action)
    assert (reward, terminated, truncated) == (GameReward.FORMAT_ERROR, True, False)
    assert "did not provide a valid move" in obs


# -- Sokoban -------------------------------------------------------------------------------
def solve_sokoban(
    walls: set[Cell], goals: set[Cell], boxes: set[Cell], player: Cell
) -> list[str] | None:
    """The fewest moves that solve a level: A* over push states (the boxes, and the player
    where the last push left it), each push costing the walk to it plus the push itself.
    The sum of each box's distance to its nearest goal never overestimates."""
    target = frozenset(goals)

    def estimate(state_boxes: frozenset[Cell]) -> int:
        return sum(min(abs(b[0] - g[0]) + abs(b[1] - g[1]) for g in goals) for b in state_boxes)

    def walks(state_boxes: frozenset[Cell], start: Cell) -> dict[Cell, list[str]]:
        routes: dict[Cell, list[str]] = {start: []}
        queue = deque([start])
        while queue:
            cell = queue.popleft()
            for name, (dr, dc) in MOVES.items():
                nxt = (cell[0] + dr, cell[1] + dc)
                if nxt not in routes and nxt not in walls and nxt not in state_boxes:
                    routes[nxt] = routes[cell] + [name]
                    queue.append(nxt)
        return routes

    start = (frozenset(boxes), player)
    costs = {start: 0}
    paths: dict[tuple[frozenset[Cell], Cell], list[str]] = {start: []}
    tie = itertools.count()
    heap = [(estimate(start[0]), next(tie), start)]
    while heap:
        _, _, state = heapq.heappop(heap)
        state_boxes, position = state
        if state_boxes == target:
            return paths[state]
        routes = walks(state_boxes, position)
        for box, (name, (dr, dc)) in itertools.product(state_boxes, MOVES.items()):
            behind, ahead = (box[0] - dr, box[1] - dc), (box[0] + dr, box[1] + dc)
            if behind in routes and ahead not in walls and ahead not in state_boxes:
                nxt = ((state_boxes - {box}) | {ahead}, box)
                path = paths[state] + routes[behind] + [name]
                if len(path) < costs.get(nxt, len(path) + 1):
                    costs[nxt], paths[nxt] = len(path), path
                    heapq.heappush(heap, (len(path) + estimate(nxt[0]), next(tie), nxt))
    return None


def sokoban_solution(env: Any) -> list[str]:
    moves = solve_sokoban(env.walls, env.goals, env.boxes, env.player)
    assert moves is not None, env.render()
    return moves


@pytest.mark.parametrize(
    ("env_id", "seeds"), [("game:Sokoban-v0-easy", range(8)), ("game:Sokoban-v0-hard", range(4))]
)
def test_a_star_solver_wins_sokoban(env_id: str, seeds: range) -> None:
    """Scripted play that plans from the env's state (walls, goals, boxes and player)."""
    env = make(env_id)
    for seed in seeds:
        env.reset(seed=seed)
        moves = sokoban_solution(env.unwrapped)
        assert len(moves) <= env.max_turns  # the reverse walk bounds the solution
        assert_won(play(env, (rf"\boxed{{{move}}}" for move in moves), seed))


@pytest.mark.parametrize("env_id", ["game:Sokoban-v0-easy", "game:Sokoban-v0-hard"])
def test_sokoban_levels_are_walled_in_and_unsolved(env_id: str) -> None:
    env = make(env_id)
    for seed in range(10):
        env.reset(seed=seed)
        rows, cols = env.dim_room
        border = {(r, c) for r in (0, rows - 1) for c in range(cols)}
        border |= {(r, c) for r in range(rows) for c in (0, cols - 1)}
        assert border <= env.walls
        assert len(env.boxes) == len(env.goals) == env.num_boxes
        assert env.boxes.isdisjoint(env.goals) and env.boxes.isdisjoint(env.walls)
        assert env.player not in env.walls | env.boxes


def test_random_sokoban_draws_gem_settings_and_the_plain_room_is_solvable() -> None:
    env = make("game:Sokoban-v0-random")
    settings = set()
    for seed in range(6):
        env.reset(seed=seed)
        settings.add((env.dim_room, env.num_boxes, env.max_turns))
        assert env.boxes.isdisjoint(env.goals) and len(env.boxes) == env.num_boxes
    assert settings == {((6, 6), 2, 20), ((8, 8), 5, 50)}
    env._plain_room()  # the fallback when no carved room works out
    assert env.boxes.isdisjoint(env.goals)
    assert len(sokoban_solution(env)) <= env.max_turns


def sokoban_level(env: Any, picture: str) -> None:
    """Set up a level drawn with the board's symbols."""
    lines = [line.split() for line in picture.strip().splitlines()]
    cells = {(r, c): s for r, line in enumerate(lines) for c, s in enumerate(line)}
    env.rows, env.cols = len(lines), len(lines[0])
    env.walls = {cell for cell, s in cells.items() if s == "#"}
    env.boxes = {cell for cell, s in cells.items() if s in "X√"}
    env.goals = {cell for cell, s in cells.items() if s in "O√S"}
    env.num_boxes = len(env.boxes)
    env.player = next(cell for cell, s in cells.items() if s in "PS")


LEVEL = """
# # # # # #
# P X _ O #
# _ X _ O #
# _ _ _ _ #
# # # # # #
"""


def test_sokoban_pushes_and_refuses_blocked_moves() -> None:
    env = make("game:Sokoban-v0-easy")
    env.reset(seed=0)
    sokoban_level(env, LEVEL)
    assert_invalid(env.step(r"\boxed{up}"), "cannot move up")  # into a wall
    obs, reward, terminated, *_ = env.step(r"\boxed{RIGHT}")
    assert "pushed a box while you moved right" in obs and (reward, terminated) == (0, False)
    assert env.player == (1, 2) and (1, 3) in env.boxes
    env.step(r"\boxed{right}")  # the top box onto its goal
    assert env.render().splitlines()[1] == "# _ _ P √ #"
    assert_invalid(env.step(r"\boxed{right}"), "cannot move right")  # a box into a wall
    assert "you moved down." in env.step(r"\boxed{down}")[0]
    assert env.render().splitlines()[2] == "# _ X P O #"
    assert env.turn_count == 5
    sokoban_level(env, "# # # # # #\n# P X X O #\n# _ _ _ O #\n# # # # # #")
    assert_invalid(env.step(r"\boxed{right}"), "cannot move right")  # a box into a box


def test_sokoban_timeout_earns_the_share_of_boxes_on_goals() -> None:
    env = make("game:Sokoban-v0-easy")  # 20 turns
    env.reset(seed=0)
    sokoban_level(env, LEVEL)
    env.step(r"\boxed{right}")
    env.step(r"\boxed{right}")  # one box of two on its goal
    for _ in range(17):
        assert env.step(r"\boxed{up}")[1] == GameReward.INVALID_ACTION
    assert env.step(r"\boxed{up}")[1:4] == (pytest.approx(0.5), True, True)


def test_sokoban_shows_the_player_on_a_goal() -> None:
    env = make("game:Sokoban-v0-easy")
    env.reset(seed=0)
    sokoban_level(env, "# # # #\n# P O #\n# X O #\n# # # #")
    env.step(r"\boxed{right}")
    assert env.render().splitlines()[1] == "# _ S #"


@pytest.mark.parametrize("action", [r"\boxed{north}", r"\boxed{up down}", r"\boxed{1}"])
def test_sokoban_takes_only_the_four_directions(action: str) -> None:
    assert_format_error(make("game:Sokoban-v0-easy"), action)


# -- Crosswords ----------------------------------------------------------------------------
def cells_of(grid: list[list[str]]) -> Iterator[tuple[Cell, str]]:
    return (((r, c), x) for r, line in enumerate(grid) for c, x in enumerate(line))


def crossword_fill(env: Any) -> Iterator[str]:
    """Scripted play that writes the answers from the env's state (``solution``)."""
    for (r, c), letter in cells_of(env.solution):
        if letter != ".":
            yield rf"\boxed{{{r} {c} {letter.lower() if (r + c) % 2 else letter}}}"


@pytest.mark.parametrize("env_id", ["game:Crosswords-v0-easy", "game:Crosswords-v0-hard"])
def test_filling_in_the_answers_wins_crosswords(env_id: str) -> None:
    env = make(env_id)
    for seed in range(6):
        env.reset(seed=seed)
        steps = play(env, crossword_fill(env.unwrapped))
        assert_won(steps)
        assert len(steps) == env.total_letter_cells <= env.max_turns


def runs(grid: list[list[str]]) -> list[str]:
    """Every word of two letters or more that reads across or down."""
    lines = ["".join(line) for line in grid] + ["".join(column) for column in zip(*grid)]
    return [run for line in lines for run in line.split(".") if len(run) > 1]


@pytest.mark.parametrize(
    "env_id", ["game:Crosswords-v0-easy", "game:Crosswords-v0-hard", "game:Crosswords-v0-random"]
)
def test_crosswords_are_connected_and_read_only_the_answers(env_id: str) -> None:
    env = make(env_id)
    for seed in range(20):
        env.reset(seed=seed)
        words = [word.upper() for word in env.placed_words]
        assert len(words) == env.num_words and sorted(runs(env.solution)) == sorted(words)
        assert env.total_letter_cells <= env.max_turns
        assert all(word in env.clues for word in env.placed_words)
        letters = {cell for cell, x in cells_of(env.solution) if x != "."}
        reached, queue = set(), [min(letters)]
        while queue:
            r, c = queue.pop()
            if (r, c) in letters and (r, c) not in reached:
                reached.add((r, c))
                queue += [(r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)]
        assert reached == letters


def test_crossword_clues_say_where_each_answer_starts() -> None:
    env = make("game:Crosswords-v0-easy")
    _, info = env.reset(seed=1)
    for i, (word, (row, col, direction)) in enumerate(env.placed_words.items(), 1):
        line = f"{i}. {env.clues[word]} ({direction}, starting at row {row}, column {col}): "
        assert line + f"{len(word)} letters" in info["suffix"]
        assert env.board[row][col] == "_"
        assert word.upper() not in info["suffix"]


def test_crossword_wrong_letter_earns_nothing_and_bad_cells_are_invalid() -> None:
    env = make("game:Crosswords-v0-easy")
    env.reset(seed=0)
    (row, col), letter = next((cell, x) for cell, x in cells_of(env.solution) if x != ".")
    wrong = "A" if letter != "A" else "B"
    obs, reward, terminated, *_ = env.step(rf"\boxed{{{row} {col} {wrong}}}")
    assert "incorrect" in obs and (reward, terminated) == (0, False)
    _, reward, *_ = env.step(rf"\boxed{{{row}, {col}, {letter.lower()}}}")
    assert reward == pytest.approx(1 / env.total_letter_cells)
    assert_invalid(env.step(rf"\boxed{{{row} {col} {letter}}}"), "already filled")
    black = next(cell for cell, x in cells_of(env.solution) if x == ".")
    assert_invalid(env.step(rf"\boxed{{{black[0]} {black[1]} A}}"), "black cell")
    assert_invalid(env.step(r"\boxed{99 0 A}"), "out of bounds")
    assert env.turn_count == 5


@pytest.mark.parametrize("action", [r"\boxed{0 0}", r"\boxed{A 0 0}", r"\boxed{0 0 AB}"])
def test_crossword_moves_need_row_column_and_one_letter(action: str) -> None:
    assert_format_error(make("game:Crosswords-v0-easy"), action)


def test_crossword_timeout_keeps_the_letters_found() -> None:
    env = make("game:Crosswords-v0-easy")  # 30 turns
    env.reset(seed=0)
    moves = list(crossword_fill(env))
    steps = play(env, moves[:2] + [r"\boxed{99 99 A}"] * 30)
    assert len(steps) == 30 and steps[-1][2:4] == (True, True)
    assert sum(step[1] for step in steps) == pytest.approx(2 / env.total_letter_cells)


def test_crossword_fallback_layout_is_still_winnable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crosswords, "_LAYOUT_ATTEMPTS", 0)
    env = make("game:Crosswords-v0-hard")
    env.reset(seed=0)
    assert sorted(runs(env.solution)) == sorted(word.upper() for word in env.placed_words)
    assert_won(play(env, crossword_fill(env)))


def test_clue_lists_ship_with_the_package() -> None:
    everyday, hard = clue_list(False), clue_list(True)
    assert len(everyday) >= 200 and len(hard) >= 100
    common = {word for n in range(3, 8) for word in word_list(n)}
    dictionary = {word for n in range(3, 8) for word in word_list(n, common=False)}
    assert {word for word, _ in everyday} <= common
    assert {word for word, _ in hard} <= dictionary
    assert all(clue and not re.search(rf"\b{word}", clue.lower()) for word, clue in everyday + hard)


# -- WordSearch ----------------------------------------------------------------------------
def word_search_answers(env: Any) -> Iterator[str]:
    """Scripted play that reports each hidden word's first and last cells from the env's
    state (``placed_words``), every other one back to front."""
    for i, (word, (row, col, direction)) in enumerate(env.placed_words.items()):
        end = (row, col + len(word) - 1) if direction == "across" else (row + len(word) - 1, col)
        first, last = ((row, col), end) if i % 2 else (end, (row, col))
        yield rf"\boxed{{{first[0]} {first[1]} {last[0]} {last[1]}}}"


@pytest.mark.parametrize("env_id", ["game:WordSearch-v0-easy", "game:WordSearch-v0-hard"])
def test_reporting_each_word_wins_word_search(env_id: str) -> None:
    env = make(env_id)
    for seed in range(6):
        env.reset(seed=seed)
        steps = play(env, word_search_answers(env.unwrapped))
        assert_won(steps)
        assert len(steps) == env.num_words


def lines_of(grid: list[list[str]]) -> list[str]:
    return ["".join(line) for line in grid] + ["".join(column) for column in zip(*grid)]


@pytest.mark.parametrize(
    "env_id", ["game:WordSearch-v0-easy", "game:WordSearch-v0-hard", "game:WordSearch-v0-random"]
)
def test_each_hidden_word_reads_exactly_once(env_id: str) -> None:
    env = make(env_id)
    dictionaries = {
        hardcore: {word.upper() for n in range(3, 8) for word in word_list(n, not hardcore)}
        for hardcore in (False, True)
    }
    for seed in range(20):
        env.reset(seed=seed)
        assert len(env.placed_words) == env.num_words
        size = round(1.5 * max(len(word) for word in env.placed_words))
        assert len(env.grid) == size and all(len(line) == size for line in env.grid)
        for word in env.placed_words:
            count = sum(len(re.findall(f"(?={word})", line)) for line in lines_of(env.grid))
            assert count == 1, (word, env.grid)
        assert set(env.placed_words) <= dictionaries[env.hardcore]


def test_word_search_guesses_that_break_the_rules_are_invalid() -> None:
    env = make("game:WordSearch-v0-easy")
    env.reset(seed=0)
    first, second = list(word_search_answers(env))[:2]
    assert "correct! You found the word" in env.step(first)[0]
    assert_invalid(env.step(first), "already tried")
    row, col, end_row, end_col = re.findall(r"\d+", first)
    assert_invalid(env.step(rf"\boxed{{{end_row} {end_col} {row} {col}}}"), "already found")
    assert_invalid(env.step(r"\boxed{0 0 2 2}"), "either across or down")
    assert_invalid(env.step(r"\boxed{0 0 0 99}"), "out of bounds")
    size = len(env.grid)
    corner = f"{size - 1} {size - 1}"
    obs, reward, terminated, *_ = env.step(rf"\boxed{{{corner} {corner}}}")
    assert "incorrect attempt" in obs and (reward, terminated) == (0, False)
    _, reward, *_ = env.step(second)
    assert reward == pytest.approx(1 / 5) and env.turn_count == 7
    assert env.suffix().count("[") == sum(len(word) for word in env.found) - crossings(env)
    assert "Words Found: 2/5" in env.suffix()


def crossings(env: Any) -> int:
    """Cells shared by two found words (shown once)."""
    cells = [
        cell
        for word in env.found
        for cell in lines.cells(word, env.placed_words[word])
    ]
    return len(cells) - len(set(cells))


@pytest.mark.parametrize("action", [r"\boxed{1 2 3}", r"\boxed{A1 B2}", r"\boxed{1 2 3 4 5}"])
def test_word_search_guesses_need_four_coordinates(action: str) -> None:
    assert_format_error(make("game:WordSearch-v0-easy"), action)


def test_word_search_timeout_keeps_the_words_found() -> None:
    env = make("game:WordSearch-v0-easy")  # 20 turns
    env.reset(seed=0)
    moves = list(word_search_answers(env))
    steps = play(env, moves[:2] + [r"\boxed{0 0 0 99}"] * 20)
    assert len(steps) == 20 and steps[-1][2:4] == (True, True)
    assert sum(step[1] for step in steps) == pytest.approx(2 / 5)


def test_word_search_fallback_grid_is_still_winnable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(word_search, "_GRID_ATTEMPTS", 0)
    env = make("game:WordSearch-v0-hard")
    env.reset(seed=0)
    for word in env.placed_words:
        assert sum(len(re.findall(f"(?={word})", line)) for line in lines_of(env.grid)) == 1
    assert_won(play(env, word_search_answers(env)))


# -- all three -----------------------------------------------------------------------------
BOARDS: dict[str, Callable[[Any], object]] = {
    "game:Sokoban-v0-hard": lambda env: env.render(),
    "game:Crosswords-v0-hard": lambda env: (env.solution, env.clues),
    "game:WordSearch-v0-hard": lambda env: env.grid,
}


@pytest.mark.parametrize("env_id", BOARDS)
def test_the_seed_fixes_the_board(env_id: str) -> None:
    boards = []
    for seed in (11, 11, 12):
        env = make(env_id)
        env.reset(seed=seed)
        boards.append(BOARDS[env_id](env))
    assert boards[0] == boards[1] != boards[2]
