"""The text games: GEM's ids, episode rules and rewards, and scripted policies that win them."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gem_sandbox.core import Env, InvalidAction, ResetNeeded
from gem_sandbox.registry import make, matching_ids, spec
from gem_sandbox_envs.games import register_all
from gem_sandbox_envs.games.base import GameReward
from gem_sandbox_envs.games.fifteen_puzzle import MOVES, is_solvable
from gem_sandbox_envs.games.game_2048 import DIRECTIONS, slide
from gem_sandbox_envs.games.mastermind import score
from gem_sandbox_envs.games.sudoku import count_solutions
from gem_sandbox_envs.games.wordle import feedback
from gem_sandbox_envs.games.words import is_word, word_list

# The installed package registers the games through its entry point; registering them again
# is a no-op, and makes these tests independent of whether the package is installed.
register_all()
GAME_IDS = matching_ids("game:*")

GAMES = [
    "GuessTheNumber",
    "Mastermind",
    "Minesweeper",
    "Wordle",
    "FifteenPuzzle",
    "Hangman",
    "Sudoku",
    "TowerofHanoi",
    "Game2048",
    "Sokoban",
    "Crosswords",
    "WordSearch",
]
#: GEM 0.1.0's registered ids for these games, and the id its README uses.
GEM_IDS = {f"game:{game}-v0-{level}" for game in GAMES for level in ("easy", "hard", "random")}
GEM_IDS |= {"game:Game2048-v0-extreme-hard", "game:GuessTheNumber-v0"}


@dataclass
class Episode:
    rewards: list[float]
    last_obs: str
    terminated: bool
    truncated: bool

    @property
    def won(self) -> bool:
        return self.terminated and not self.truncated and "Congratulations" in self.last_obs

    @property
    def total(self) -> float:
        return sum(self.rewards)


def play(env: Env, policy: Callable[[str], str], seed: int) -> Episode:
    """Run one episode; ``policy`` sees each observation followed by its board suffix."""
    obs, info = env.reset(seed=seed)
    rewards = []
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(f"{obs}\n{info['suffix']}"))
        rewards.append(float(reward))
        if terminated or truncated:
            return Episode(rewards, obs, terminated, truncated)


def random_transcript(env: Env, seed: int) -> list[Any]:
    transcript: list[Any] = [env.reset(seed=seed)]
    while True:
        step = env.step(env.sample_random_action())
        transcript.append(step)
        if step[2] or step[3]:
            return transcript


def scripted(actions: Iterable[str]) -> Callable[[str], str]:
    """A policy that plays ``actions`` in order, whatever it observes."""
    remaining = iter(actions)
    return lambda obs: next(remaining)


def assert_won(episode: Episode) -> None:
    assert episode.won, episode.last_obs
    assert episode.total == pytest.approx(GameReward.SUCCESS)


# -- the catalogue -------------------------------------------------------------------------
def test_every_gem_game_id_is_registered() -> None:
    assert set(GAME_IDS) >= GEM_IDS


def test_word_lists_load_from_the_package() -> None:
    common, everything = word_list(5), word_list(5, common=False)
    assert set(common) < set(everything)
    assert all(re.fullmatch("[a-z]{5}", word) for word in everything)
    assert is_word("CRANE") and not is_word("xqzvb")


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_make_builds_a_playable_env(env_id: str) -> None:
    env = make(env_id, seed=0)
    obs, info = env.reset()
    assert obs and isinstance(info["suffix"], str)
    action = env.sample_random_action()
    assert re.fullmatch(r"\\boxed\{[^{}]+\}", action)
    obs, reward, *_ = env.step(action)
    assert isinstance(obs, str) and reward >= 0


@pytest.mark.parametrize("game", GAMES)
def test_a_misspelt_option_is_a_type_error_listing_the_valid_ones(game: str) -> None:
    env_id = f"game:{game}-v0"
    with pytest.raises(TypeError, match=r"unknown option 'max_turn' \(did you mean 'max_turns'\?\)") as caught:
        make(env_id, max_turn=5)
    valid = caught.value.args[0].partition("its options are ")[2].split(", ")
    assert set(valid) >= {*spec(env_id).kwargs, "seed"}


# -- GEM's episode rules, for every game ---------------------------------------------------
@pytest.mark.parametrize("env_id", GAME_IDS)
def test_random_play_ends_within_max_turns(env_id: str) -> None:
    env = make(env_id)
    for seed in range(5):
        transcript = random_transcript(env, seed)
        turns = len(transcript) - 1
        _, _, terminated, truncated, _ = transcript[-1]
        assert terminated and turns <= env.max_turns
        assert not truncated or turns == env.max_turns


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_a_step_after_the_game_ended_is_refused(env_id: str) -> None:
    env = make(env_id)
    turns = len(random_transcript(env, seed=0)) - 1
    with pytest.raises(ResetNeeded, match=f"episode ended at turn {turns}; call reset"):
        env.step(env.sample_random_action())
    assert env.turn_count == turns  # no turn was played past the end


@pytest.mark.parametrize("env_id", GAME_IDS)
@pytest.mark.parametrize("action", ["I give up.", r"\boxed{???}", r"\boxed{}"])
def test_malformed_action_ends_the_episode_with_format_penalty(env_id: str, action: str) -> None:
    env = make(env_id)
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(action)
    assert (reward, terminated, truncated) == (GameReward.FORMAT_ERROR, True, False)
    assert "did not provide a valid move" in obs
    with pytest.raises(ResetNeeded, match="ended at turn 1"):  # penalized once, not again
        env.step(action)


@pytest.mark.parametrize("env_id", GAME_IDS)
@pytest.mark.parametrize("action", [7, None, [r"\boxed{1}"]])
def test_a_non_string_action_is_an_error_not_a_format_penalty(env_id: str, action: Any) -> None:
    """Not a format error, which would score the model: a non-string is the caller's bug, so
    it raises, and the turn is not spent."""
    env = make(env_id)
    env.reset(seed=0)
    with pytest.raises(InvalidAction, match=f"actions are strings.*got {type(action).__name__}"):
        env.step(action)
    assert env.turn_count == 0
    assert env.step("I give up.")[1] == GameReward.FORMAT_ERROR  # a string is still scored


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_same_seed_replays_the_same_episode(env_id: str) -> None:
    transcript = random_transcript(make(env_id), seed=7)
    assert random_transcript(make(env_id), seed=7) == transcript
    fresh = make(env_id, seed=7)  # seeding at construction is the same as at reset
    assert [fresh.reset()] == transcript[:1]


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_async_face_plays_like_the_sync_one(env_id: str) -> None:
    async def first_steps(env: Env) -> list[Any]:
        return [await env.areset(seed=5), await env.astep(env.sample_random_action())]

    env = make(env_id)
    expected = [env.reset(seed=5), env.step(env.sample_random_action())]
    assert asyncio.run(first_steps(make(env_id))) == expected


def mines_after_first_reveal(env: Any) -> frozenset[tuple[int, int]]:
    env.step(r"\boxed{reveal 2 2}")
    return frozenset(env.mines)


#: Where each game hides what the seed draws (Tower of Hanoi always starts the same way).
SECRETS: dict[str, Callable[[Any], object]] = {
    "game:GuessTheNumber-v0-easy": lambda env: env.target,
    "game:Mastermind-v0-easy": lambda env: env.code,
    "game:Minesweeper-v0-easy": mines_after_first_reveal,
    "game:Wordle-v0-easy": lambda env: env.secret,
    "game:FifteenPuzzle-v0-easy": lambda env: tuple(env.tiles),
    "game:Hangman-v0-easy": lambda env: env.secret,
    "game:Sudoku-v0-easy": lambda env: str(env.solution),
    "game:Game2048-v0-easy": lambda env: str(env.board),
    "game:TowerofHanoi-v0-random": lambda env: env.num_disks,
    "game:Sokoban-v0-easy": lambda env: env.render(),
    "game:Crosswords-v0-easy": lambda env: str(env.solution),
    "game:WordSearch-v0-easy": lambda env: str(env.grid),
}


@pytest.mark.parametrize("env_id", SECRETS)
def test_different_seeds_draw_different_games(env_id: str) -> None:
    secrets = set()
    for seed in range(6):
        env = make(env_id)
        env.reset(seed=seed)
        secrets.add(SECRETS[env_id](env))
    assert len(secrets) > 1


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_set_state_restores_an_episode_midway(env_id: str) -> None:
    env = make(env_id)
    env.reset(seed=3)
    env.step(env.sample_random_action())
    state = env.get_state()

    def continuation() -> list[Any]:
        return [env.step(env.sample_random_action()) for _ in range(3)]

    first = continuation()
    env.set_state(state)
    assert continuation() == first


# -- Guess the Number ----------------------------------------------------------------------
def binary_search(low: int, high: int) -> Callable[[str], str]:
    def policy(obs: str) -> str:
        nonlocal low, high
        if hint := re.search(r"you guessed (\d+), and the target number is (higher|lower)", obs):
            guess = int(hint[1])
            low, high = (guess + 1, high) if hint[2] == "higher" else (low, guess - 1)
        return rf"\boxed{{{(low + high) // 2}}}"

    return policy


@pytest.mark.parametrize("env_id", [i for i in GAME_IDS if "GuessTheNumber" in i])
def test_binary_search_wins_guess_the_number(env_id: str) -> None:
    env = make(env_id)
    for seed in range(10):
        env.reset(seed=seed)  # settings are known once an episode starts
        episode = play(env, binary_search(env.min_number, env.max_number), seed)
        assert_won(episode)
        assert episode.rewards[-1] == GameReward.SUCCESS


def test_last_parseable_box_is_the_move() -> None:
    env = make("game:GuessTheNumber-v0")
    env.reset(seed=0)
    obs, _, terminated, *_ = env.step(r"\boxed{5} or maybe \boxed{five}")
    assert "you guessed 5" in obs and not terminated


@pytest.mark.parametrize("guess", [0, -3, 21])
def test_out_of_range_guess_is_invalid_not_malformed(guess: int) -> None:
    # GEM's ``if not player_guess`` made a guess of 0 a format error; here it is just out of range.
    env = make("game:GuessTheNumber-v0")
    env.reset(seed=0)
    obs, reward, terminated, *_ = env.step(rf"\boxed{{{guess}}}")
    assert (reward, terminated) == (GameReward.INVALID_ACTION, False)
    assert "outside the range" in obs


def test_repeated_guess_is_invalid() -> None:
    env = make("game:GuessTheNumber-v0")
    env.reset(seed=0)
    wrong = 1 if env.target != 1 else 2
    env.step(rf"\boxed{{{wrong}}}")
    obs, reward, *_ = env.step(rf"\boxed{{{wrong}}}")
    assert "already guessed" in obs and reward == GameReward.INVALID_ACTION


def test_running_out_of_guesses_scores_the_last_guess_by_closeness() -> None:
    env = make("game:GuessTheNumber-v0-easy")  # 1..10 in 4 turns
    env.reset(seed=0)
    wrong = [n for n in range(1, 11) if n != env.target]
    for guess in wrong[:3]:
        env.step(rf"\boxed{{{guess}}}")
    _, reward, terminated, truncated, _ = env.step(rf"\boxed{{{wrong[3]}}}")
    assert (terminated, truncated) == (True, True)
    assert reward == pytest.approx(1 - abs(wrong[3] - env.target) / 9)


def test_format_error_on_the_last_turn_is_also_truncated() -> None:
    env = make("game:GuessTheNumber-v0-easy")
    env.reset(seed=0)
    for _ in range(3):
        env.step(r"\boxed{99}")
    assert env.step("no idea")[1:4] == (GameReward.FORMAT_ERROR, True, True)


# -- Mastermind ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "guess", "pegs"),
    [
        ((1, 2, 3, 4), (1, 2, 3, 4), (4, 0)),
        ((1, 2, 3, 4), (4, 3, 2, 1), (0, 4)),
        ((1, 1, 2, 2), (1, 2, 1, 3), (1, 2)),
        ((1, 2, 3, 4), (5, 5, 5, 1), (0, 1)),
    ],
)
def test_mastermind_pegs(
    code: tuple[int, ...], guess: tuple[int, ...], pegs: tuple[int, int]
) -> None:
    assert score(code, guess) == pegs


def consistent_code_solver(code_length: int, num_numbers: int) -> Callable[[str], str]:
    """Always guess the first code consistent with every answer so far."""
    candidates = list(itertools.permutations(range(1, num_numbers + 1), code_length))

    def policy(obs: str) -> str:
        nonlocal candidates
        if pegs := re.search(
            r"you guessed ([\d ]+)\. This guess receives (\d+) black peg\(s\) and (\d+)", obs
        ):
            guess = tuple(map(int, pegs[1].split()))
            candidates = [c for c in candidates if score(c, guess) == (int(pegs[2]), int(pegs[3]))]
        return rf"\boxed{{{' '.join(map(str, candidates[0]))}}}"

    return policy


@pytest.mark.parametrize("env_id", ["game:Mastermind-v0-easy", "game:Mastermind-v0-hard"])
def test_consistent_code_solver_wins_mastermind(env_id: str) -> None:
    env = make(env_id)
    for seed in range(10):
        env.reset(seed=seed)  # settings are known once an episode starts
        assert_won(play(env, consistent_code_solver(env.code_length, env.num_numbers), seed))


# -- Minesweeper ---------------------------------------------------------------------------
def test_first_reveal_is_safe_and_opens_its_neighbourhood() -> None:
    env = make("game:Minesweeper-v0-hard")
    for seed in range(10):
        env.reset(seed=seed)
        _, reward, terminated, *_ = env.step(r"\boxed{reveal 0 7}")
        assert not terminated and reward > 0
        assert {(0, 6), (1, 6), (1, 7)} <= env.revealed


@pytest.mark.parametrize("env_id", ["game:Minesweeper-v0-easy", "game:Minesweeper-v0-hard"])
def test_revealing_every_safe_cell_wins_minesweeper(env_id: str) -> None:
    """Scripted play that peeks at the mines in the env's state (``env.unwrapped.mines``)."""
    env = make(env_id)

    def policy(obs: str) -> str:
        state = env.unwrapped
        cells = itertools.product(range(state.rows), range(state.cols))
        row, col = next(c for c in cells if c not in state.mines and c not in state.revealed)
        return rf"\boxed{{reveal {row} {col}}}"

    for seed in range(5):
        assert_won(play(env, policy, seed))


def test_winning_minesweeper_needs_no_flags() -> None:
    # GEM also required every mine to be flagged, which made a fully revealed board unwinnable.
    env = make("game:Minesweeper-v0-easy")
    env.reset(seed=1)
    observations = [env.step(r"\boxed{reveal 2 2}")[0]]
    for cell in itertools.product(range(5), repeat=2):
        if cell not in env.mines and cell not in env.revealed:
            observations.append(env.step(rf"\boxed{{reveal {cell[0]} {cell[1]}}}")[0])
    assert "Congratulations" in observations[-1] and not env.flags


def test_revealing_a_mine_loses() -> None:
    env = make("game:Minesweeper-v0-easy")
    env.reset(seed=0)
    env.step(r"\boxed{reveal 2 2}")
    row, col = min(env.mines)
    obs, reward, terminated, truncated, _ = env.step(rf"\boxed{{reveal {row} {col}}}")
    assert (reward, terminated, truncated) == (GameReward.FAIL, True, False)
    assert "hit a mine" in obs


def test_flagged_cell_cannot_be_revealed_until_unflagged() -> None:
    env = make("game:Minesweeper-v0-easy")
    env.reset(seed=0)
    assert "added a flag" in env.step(r"\boxed{flag 0 0}")[0]
    assert "already been flagged" in env.step(r"\boxed{reveal 0 0}")[0]
    assert "removed a flag" in env.step(r"\boxed{FLAG 0 0}")[0]


# -- Tower of Hanoi ------------------------------------------------------------------------
def hanoi_moves(disks: int, src: str = "A", dst: str = "C", via: str = "B") -> Iterator[str]:
    if disks:
        yield from hanoi_moves(disks - 1, src, via, dst)
        yield rf"\boxed{{{src} {dst}}}"
        yield from hanoi_moves(disks - 1, via, dst, src)


@pytest.mark.parametrize("env_id", [i for i in GAME_IDS if "TowerofHanoi" in i])
def test_recursive_solution_wins_tower_of_hanoi(env_id: str) -> None:
    env = make(env_id)
    for seed in range(3):
        env.reset(seed=seed)
        episode = play(env, scripted(hanoi_moves(env.num_disks)), seed)
        assert_won(episode)
        assert len(episode.rewards) == 2**env.num_disks - 1


def test_hanoi_timeout_credits_disks_on_c_and_same_tower_is_invalid() -> None:
    env = make("game:TowerofHanoi-v0-easy")  # 3 disks, 10 turns
    env.reset(seed=0)
    assert env.step(r"\boxed{a,c}")[1] == GameReward.INTERNAL_STEP
    assert "to itself" in env.step(r"\boxed{B B}")[0]
    for _ in range(7):
        env.step(r"\boxed{B A}")  # tower B is empty: invalid
    assert env.step(r"\boxed{AB}")[1:4] == (pytest.approx(1 / 3), True, True)


# -- Sudoku --------------------------------------------------------------------------------
def solve_sudoku(grid: list[list[int]]) -> list[list[int]] | None:
    """Plain backtracking over the empty cells in reading order."""
    size = len(grid)
    box = int(size**0.5)
    empty = next(((r, c) for r in range(size) for c in range(size) if not grid[r][c]), None)
    if empty is None:
        return grid
    r, c = empty
    top, left = r - r % box, c - c % box
    used = set(grid[r]) | {grid[i][c] for i in range(size)}
    used |= {grid[i][j] for i in range(top, top + box) for j in range(left, left + box)}
    for digit in set(range(1, size + 1)) - used:
        grid[r][c] = digit
        if solve_sudoku(grid):
            return grid
    grid[r][c] = 0
    return None


@pytest.mark.parametrize("env_id", ["game:Sudoku-v0-easy", "game:Sudoku-v0-hard"])
def test_backtracking_solver_wins_sudoku(env_id: str) -> None:
    """Scripted play that reads the puzzle from the env's state (``env.unwrapped.board``)."""
    env = make(env_id)
    for seed in range(3):
        env.reset(seed=seed)
        puzzle = [row[:] for row in env.unwrapped.board]
        solution = solve_sudoku([row[:] for row in puzzle])
        moves = (
            rf"\boxed{{{r + 1} {c + 1} {solution[r][c]}}}"
            for r, c in itertools.product(range(env.scale), repeat=2)
            if not puzzle[r][c]
        )
        assert_won(play(env, scripted(moves), seed))


@pytest.mark.parametrize("env_id", ["game:Sudoku-v0-easy", "game:Sudoku-v0-hard"])
def test_sudoku_puzzles_have_one_solution_and_enough_clues(env_id: str) -> None:
    env = make(env_id)
    for seed in range(3):
        env.reset(seed=seed)
        assert count_solutions(env.board) == 1
        assert sum(map(bool, itertools.chain(*env.board))) >= env.clues
        assert env.num_empty <= env.max_turns


def test_wrong_digit_and_filled_cell_are_invalid() -> None:
    env = make("game:Sudoku-v0-easy")
    env.reset(seed=0)
    r, c = next((r, c) for r in range(4) for c in range(4) if not env.board[r][c])
    wrong = env.solution[r][c] % 4 + 1
    assert "incorrect" in env.step(rf"\boxed{{{r + 1} {c + 1} {wrong}}}")[0]
    r, c = next((r, c) for r in range(4) for c in range(4) if env.board[r][c])
    assert "already filled" in env.step(rf"\boxed{{{r + 1} {c + 1} 1}}")[0]


# -- Fifteen puzzle ------------------------------------------------------------------------
def neighbours(tiles: tuple[int, ...], width: int) -> Iterator[tuple[str, tuple[int, ...]]]:
    blank = tiles.index(0)
    for move, (dr, dc) in MOVES.items():
        row, col = blank // width + dr, blank % width + dc
        if 0 <= row < width and 0 <= col < width:
            swapped = list(tiles)
            swapped[blank], swapped[row * width + col] = swapped[row * width + col], 0
            yield move, tuple(swapped)


def shortest_solution(tiles: tuple[int, ...], width: int) -> list[str] | None:
    goal = (*range(1, width * width), 0)
    paths = {tiles: []}
    queue = deque([tiles])
    while queue:
        state = queue.popleft()
        if state == goal:
            return paths[state]
        for move, nxt in neighbours(state, width):
            if nxt not in paths:
                paths[nxt] = paths[state] + [move]
                queue.append(nxt)
    return None


def test_solvability_test_matches_reachability_on_2x2() -> None:
    for tiles in itertools.permutations(range(4)):
        assert is_solvable(list(tiles), 2) == (shortest_solution(tiles, 2) is not None)


def test_bfs_solution_wins_the_easy_fifteen_puzzle() -> None:
    """Scripted play that plans from the env's state (``env.unwrapped.tiles``)."""
    env = make("game:FifteenPuzzle-v0-easy")
    for seed in range(10):
        env.reset(seed=seed)
        moves = shortest_solution(tuple(env.unwrapped.tiles), 2)
        assert_won(play(env, scripted(rf"\boxed{{{move}}}" for move in moves), seed))


def test_fifteen_puzzle_boards_are_solvable_and_unsolved() -> None:
    env = make("game:FifteenPuzzle-v0-hard")
    for seed in range(20):
        env.reset(seed=seed)
        assert is_solvable(env.tiles, 4) and env.tiles != [*range(1, 16), 0]


def test_fifteen_timeout_adds_the_share_of_squares_in_place() -> None:
    env = make("game:FifteenPuzzle-v0-easy")  # 10 turns
    env.reset(seed=0)
    stuck = "down" if env.tiles.index(0) < 2 else "up"  # the blank's row has nothing beyond it
    for _ in range(9):
        assert env.step(rf"\boxed{{{stuck.upper()}}}")[1] == GameReward.INVALID_ACTION
    in_place = sum(a == b for a, b in zip(env.tiles, [1, 2, 3, 0]))
    assert env.step(rf"\boxed{{{stuck}}}")[1:4] == (pytest.approx(in_place / 4), True, True)


# -- 2048 ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("row", "left"),
    [
        ([2, 2, 2, 2], [4, 4, 0, 0]),
        ([2, 2, 4, 0], [4, 4, 0, 0]),
        ([4, 0, 4, 8], [8, 8, 0, 0]),
        ([2, 4, 8, 16], [2, 4, 8, 16]),
    ],
)
def test_2048_merges_each_tile_once(row: list[int], left: list[int]) -> None:
    assert slide([row], "left") == [left]
    assert slide([row[::-1]], "right") == [left[::-1]]
    assert slide([[x] for x in row], "up") == [[x] for x in left]


def greedy_2048(board: list[list[int]]) -> str:
    """The move leaving the most empty cells plus adjacent equal pairs."""

    def openness(after: list[list[int]]) -> int:
        lines = after + [list(col) for col in zip(*after)]
        return sum(row.count(0) for row in after) + sum(
            a == b != 0 for line in lines for a, b in itertools.pairwise(line)
        )

    moves = [d for d in DIRECTIONS if slide(board, d) != board]
    return max(moves, key=lambda d: openness(slide(board, d)))


def test_greedy_policy_reaches_64_in_easy_2048() -> None:
    """Scripted play that reads the board from the env's state (``env.unwrapped.board``).

    Reaching 64 in 50 moves cannot be guaranteed (about 28 spawned tiles are needed and spawns
    are random), so this checks a fixed set of seeds on which the greedy policy wins (it wins 97
    of seeds 0-99).
    """
    env = make("game:Game2048-v0-easy")
    for seed in range(1, 11):
        assert_won(play(env, lambda obs: rf"\boxed{{{greedy_2048(env.unwrapped.board)}}}", seed))


def test_move_that_changes_nothing_is_invalid() -> None:
    env = make("game:Game2048-v0-easy")
    env.reset(seed=0)
    env.board = [[2, 4, 2, 4], [0] * 4, [0] * 4, [0] * 4]
    obs, reward, terminated, *_ = env.step(r"\boxed{up}")
    assert "doesn't change" in obs and (reward, terminated) == (GameReward.INVALID_ACTION, False)


# -- Hangman -------------------------------------------------------------------------------
def letter_frequency_solver(length: int) -> Callable[[str], str]:
    """Guess the letter most words consistent with the grid contain; the word once it is sure."""
    candidates = word_list(length)
    guessed: set[str] = set()

    def policy(obs: str) -> str:
        nonlocal candidates
        grid = obs.split("Hangman grid:\n")[1].splitlines()[1].split()
        pattern = re.compile(
            "".join(c.lower() if c != "_" else f"[^{''.join(guessed) or '_'}]" for c in grid)
        )
        candidates = [w for w in candidates if pattern.fullmatch(w)]
        if len(candidates) == 1:
            return rf"\boxed{{{candidates[0]}}}"
        counts = Counter(c for w in candidates for c in set(w) - guessed)
        letter = counts.most_common(1)[0][0]
        guessed.add(letter)
        return rf"\boxed{{{letter}}}"

    return policy


@pytest.mark.parametrize("env_id", ["game:Hangman-v0-easy", "game:Hangman-v0-hard"])
def test_letter_frequency_solver_wins_hangman(env_id: str) -> None:
    env = make(env_id)
    for seed in range(10):
        env.reset(seed=seed)
        assert_won(play(env, letter_frequency_solver(env.word_length), seed))


def test_hangman_word_guess_earns_half_plus_the_hidden_share() -> None:
    env = make("game:Hangman-v0-easy")
    env.reset(seed=0)
    first = env.secret[0]
    revealed = env.secret.count(first)
    assert env.step(rf"\boxed{{{first}}}")[1] == pytest.approx(0.5 * revealed / 3)
    assert env.step(rf"\boxed{{{env.secret.lower()}}}")[1] == pytest.approx(
        0.5 + 0.5 * (3 - revealed) / 3
    )


# -- Wordle --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("secret", "guess", "marks"),
    [
        ("CRANE", "CRANE", "GGGGG"),
        ("CRANE", "NACRE", "YYYYG"),
        ("ABBEY", "BABES", "YYGGX"),
        ("ALLOT", "LLAMA", "YGYXX"),
        ("ROBOT", "FLOOR", "XXYGY"),
    ],
)
def test_wordle_feedback_counts_repeated_letters(secret: str, guess: str, marks: str) -> None:
    assert feedback(secret, guess) == marks


def candidate_filter_solver(length: int) -> Callable[[str], str]:
    """Guess the first word consistent with all the feedback so far."""
    candidates = word_list(length)

    def policy(obs: str) -> str:
        nonlocal candidates
        if "Feedback:" in obs:
            guess, marks = (
                line.replace(" ", "") for line in obs.split("Feedback:\n")[1].splitlines()[:2]
            )
            candidates = [w for w in candidates if feedback(w.upper(), guess) == marks]
        return rf"\boxed{{{candidates[0]}}}"

    return policy


@pytest.mark.parametrize("env_id", ["game:Wordle-v0-easy", "game:Wordle-v0-hard"])
def test_candidate_filter_solver_wins_wordle(env_id: str) -> None:
    env = make(env_id)
    for seed in range(10):
        env.reset(seed=seed)
        assert_won(play(env, candidate_filter_solver(env.word_length), seed))


def test_wordle_rejects_non_words_unless_asked_not_to() -> None:
    strict = make("game:Wordle-v0-hard")
    strict.reset(seed=0)
    assert "not a word" in strict.step(r"\boxed{XQZVB}")[0]
    lenient = make("game:Wordle-v0-hard", only_real_words=False)
    lenient.reset(seed=0)
    assert "Feedback" in lenient.step(r"\boxed{X Q Z V B}")[0]
