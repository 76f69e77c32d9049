"""``\\boxed{}`` extraction, shared by the games and (later) the math envs."""

from gem_sandbox.utils.parsing import boxed_answers, last_boxed_answer


def test_boxed_answers_in_order() -> None:
    assert boxed_answers(r"first \boxed{1} then \boxed{ up }") == ["1", " up "]


def test_nested_braces_stay_in_the_answer() -> None:
    assert last_boxed_answer(r"so \boxed{\frac{1}{2}}.") == r"\frac{1}{2}"


def test_box_inside_a_box_is_part_of_the_outer_answer() -> None:
    assert boxed_answers(r"\boxed{\boxed{5}}") == [r"\boxed{5}"]


def test_unclosed_box_is_skipped() -> None:
    assert boxed_answers(r"\boxed{1 \boxed{2}") == ["2"]
    assert last_boxed_answer(r"\boxed{never closed") is None


def test_fbox_and_space_before_brace_count_as_boxes() -> None:
    assert boxed_answers(r"\fbox{A} \boxed {B}") == ["A", "B"]


def test_no_box_gives_none() -> None:
    assert last_boxed_answer("the answer is 42") is None
    assert boxed_answers("") == []
