import json
import subprocess


def aggregate(lines):
    result = subprocess.run(
        ["python3", "/app/aggregate.py"], input="".join(lines), capture_output=True, text=True, timeout=10
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def event(user, name, ms):
    return json.dumps({"user": user, "event": name, "ms": ms}) + "\n"


def test_counts_medians_and_first_events():
    lines = [event("u1", "a", 30), event("u2", "x", 5), event("u1", "b", 10), event("u1", "c", 20), event("u1", "d", 40)]
    assert aggregate(lines) == {
        "u1": {"events": 4, "p50_ms": 20, "first": "a"},
        "u2": {"events": 1, "p50_ms": 5, "first": "x"},
        "_invalid": 0,
    }


def test_invalid_lines_are_skipped_and_counted():
    lines = [
        "{broken\n",
        json.dumps({"user": "u", "event": "e"}) + "\n",
        json.dumps({"user": "u", "event": "e", "ms": "12"}) + "\n",
        json.dumps([1, 2]) + "\n",
        event("u", "ok", 7),
    ]
    assert aggregate(lines) == {"u": {"events": 1, "p50_ms": 7, "first": "ok"}, "_invalid": 4}


def test_empty_input():
    assert aggregate([]) == {"_invalid": 0}
