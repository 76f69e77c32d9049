EXPECTED = ["code,count", "E2001,3", "E0007,2", "E1042,2", "E0500,1"]


def test_error_counts():
    with open("/app/errors.csv") as f:
        assert [line.rstrip("\n") for line in f if line.strip()] == EXPECTED
