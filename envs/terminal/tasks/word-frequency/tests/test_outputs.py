# The expected lines are computed from the corpus as setup.sh wrote it, kept here: a test that
# re-read /app/corpus.txt would accept any corpus the model rewrote to match its answer.
EXPECTED = ["8 the", "5 a", "5 keeper", "5 late", "5 ships"]


def test_top_five_words():
    with open("/app/top.txt") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    assert lines == EXPECTED
