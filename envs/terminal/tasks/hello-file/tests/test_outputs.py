import subprocess
import tempfile


def test_greeting_text():
    with open("/app/greeting.txt") as f:
        assert f.read() == "Hello, sandbox!\n"


def test_script_prints_the_greeting_from_anywhere():
    elsewhere = tempfile.mkdtemp()
    result = subprocess.run(["/app/greet.sh"], cwd=elsewhere, capture_output=True, text=True, timeout=10)
    assert result.returncode == 0
    assert result.stdout == "Hello, sandbox!\n"
