"""Every language SandboxFusion serves that Debian provides, run by the agent itself.

On Docker with the polyglot image (``gem-sandbox images build --profile polyglot``): per
language a hello world and a broken program through ``Sandbox.run``. A compiled language's
compiler runs in a phase of its own (``ExecResult.compile``) and a broken program stops there;
a test-runner language's verdict is its runner's exit status. The mechanics that need no
polyglot image (the compile phase's own deadline, the refusals naming what is missing) run on
bubblewrap and Docker with the default image too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gem_sandbox.agent import languages
from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.client import Sandbox, open_sandbox
from gem_sandbox.sandbox.errors import UnsupportedLanguage
from gem_sandbox.sandbox.result import Status
from tests.docker_fixtures import docker_sdk
from tests.sandbox_fixtures import sandbox  # noqa: F401

pytestmark = pytest.mark.anyio

# language -> (a program printing "hello", a program its compiler or interpreter rejects)
PROGRAMS = {
    "python": ('print("hello")', "print(("),
    "bash": ("echo hello", "if then fi"),
    "cpp": ('#include <cstdio>\nint main() { puts("hello"); }', "int main() { return undefined_name; }"),
    "nodejs": ('console.log("hello")', "console.log("),
    "typescript": ('const s: string = "hello";\nconsole.log(s);', "const s: string = ;"),
    "go": (
        'package main\nimport "fmt"\nfunc main() { fmt.Println("hello") }',
        "package main\nfunc main() { undefinedName() }",
    ),
    "java": (
        'public class Main { public static void main(String[] a) { System.out.println("hello"); } }',
        'public class Main { public static void main(String[] a) { System.out.println("hello") } }',
    ),
    "scala": (
        'object Main { def main(args: Array[String]): Unit = println("hello") }',
        "object Main { def main(args: Array[String]): Unit = println(undefinedName) }",
    ),
    "kotlin_script": ('println("hello")', "println(undefinedName)"),
    "csharp": (
        'using System;\nclass Program { static void Main() { Console.WriteLine("hello"); } }',
        'using System;\nclass Program { static void Main() { Console.WriteLine("hello") } }',
    ),
    "php": ('echo "hello\\n";', 'echo "hello\\n"\necho "again";'),
    "rust": ('fn main() { println!("hello"); }', 'fn main() { let x: i32 = "s"; }'),
    "sql": ("SELECT 'hello';", "SELEC 1;"),
    "lua": ('print("hello")', "print("),
    "R": ('cat("hello\\n")', 'cat("hello"'),
    "perl": ('print "hello\\n";', 'print "hello\\n" }'),
    "ruby": ('puts "hello"', "puts("),
    "D_ut": (
        'import std.stdio;\nvoid main() { writeln("hello"); }',  # no unittest: main runs
        "void main() { undefinedName(); }",
    ),
    "verilog": (
        'module tb;\n  initial begin\n    $display("hello");\n    $finish;\n  end\nendmodule',
        'module tb;\n  initial begin\n    $display("hello")\n  end\nendmodule',
    ),
    "racket": ('#lang racket\n(displayln "hello")', '#lang racket\n(displayln "hello"'),
}
# test-runner language -> (a passing test file, a failing one)
TESTS = {
    "pytest": ("def test_adds():\n    assert 1 + 1 == 2", "def test_adds():\n    assert 1 + 1 == 3"),
    "go_test": (
        'package main\nimport "testing"\nfunc TestAdds(t *testing.T) { if 1+1 != 2 { t.Fatal("no") } }',
        'package main\nimport "testing"\nfunc TestAdds(t *testing.T) { if 1+1 != 3 { t.Fatal("no") } }',
    ),
    "junit": (
        "import org.junit.jupiter.api.Test;\n"
        "import static org.junit.jupiter.api.Assertions.assertEquals;\n"
        "public class AdderTest { @Test void adds() { assertEquals(2, 1 + 1); } }",
        "import org.junit.jupiter.api.Test;\n"
        "import static org.junit.jupiter.api.Assertions.assertEquals;\n"
        "public class AdderTest { @Test void adds() { assertEquals(3, 1 + 1); } }",
    ),
    "jest": (
        'test("adds", () => { expect(1 + 1).toBe(2); });',
        'test("adds", () => { expect(1 + 1).toBe(3); });',
    ),
    "D_ut": (
        "unittest { assert(1 + 1 == 2); }\nvoid main() {}",
        "unittest { assert(1 + 1 == 3); }\nvoid main() {}",
    ),
}
# test-runner language -> what its runner reports for the passing file, and for the failing one
REPORTS = {
    "pytest": ("1 passed", "1 failed"),
    "go_test": ("ok", "--- FAIL: TestAdds"),
    "junit": ("1 tests successful", "1 tests failed"),
    "jest": ("1 passed", "1 failed"),
    "D_ut": ("1 modules passed unittests", "1/1 modules FAILED unittests"),
}
COMPILED = {name for name, language in languages.TABLE.items() if language.compile}
TIMEOUT = 60  # a cold JVM compiler on a loaded machine takes seconds
COMPILE_TIMEOUT = 60


def test_every_language_sandboxfusion_serves_is_in_the_table_or_says_why_not() -> None:
    fusion = {
        "python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash", "typescript",
        "sql", "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest",
        "junit", "kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket",
    }  # fmt: skip
    assert fusion == {"python"} | set(languages.TABLE) | set(languages.UNAVAILABLE)
    assert set(PROGRAMS) | set(TESTS) == {"python"} | set(languages.TABLE)
    assert set(REPORTS) == set(TESTS)


# --- the polyglot image ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def polyglot_image() -> str:
    docker_sdk()
    from gem_sandbox.sandbox.backends.docker import DockerBackend, images

    problem = DockerBackend.check()
    if problem:
        pytest.skip(problem)
    image = images.default_image("polyglot")
    if image is None:
        pytest.skip("the polyglot image is not built: gem-sandbox images build --profile polyglot")
    return image


@pytest.fixture
async def polyglot(polyglot_image: str) -> AsyncIterator[Sandbox]:
    """A sandbox of the polyglot image with the default sandbox and run limits."""
    from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions
    from tests.docker_fixtures import TEST_POOL
    from gem_sandbox.sandbox.backends.base import POOL_LABEL

    backend = DockerBackend(DockerOptions(image=polyglot_image))
    try:
        async with open_sandbox(backend, SandboxSpec(labels={POOL_LABEL: TEST_POOL})) as box:
            yield box
    finally:
        await backend.aclose()


@pytest.mark.docker
async def test_the_polyglot_image_serves_every_language_of_the_table(polyglot: Sandbox) -> None:
    assert polyglot.hello["languages"] == ["python", *languages.TABLE]


@pytest.mark.docker
@pytest.mark.parametrize("language", sorted(PROGRAMS))
async def test_hello_world(polyglot: Sandbox, language: str) -> None:
    result = await polyglot.run(
        PROGRAMS[language][0], language, timeout=TIMEOUT, compile_timeout=COMPILE_TIMEOUT
    )
    assert (result.status, result.stdout) == (Status.OK, "hello\n"), result
    if language in COMPILED:
        assert result.compile is not None and result.compile.status is Status.OK
    else:
        assert result.compile is None


@pytest.mark.docker
@pytest.mark.parametrize("language", sorted(PROGRAMS))
async def test_a_broken_program_is_an_error_with_the_toolchains_message(
    polyglot: Sandbox, language: str
) -> None:
    result = await polyglot.run(
        PROGRAMS[language][1], language, timeout=TIMEOUT, compile_timeout=COMPILE_TIMEOUT
    )
    assert result.status is Status.ERROR and result.exit_code != 0, result
    assert "hello" not in result.stdout
    assert result.stderr.strip() or result.stdout.strip()  # the compiler's or runtime's words
    if language in COMPILED:  # stopped at the compile phase, which is the result
        assert result.compile is not None
        assert (result.compile.status, result.compile.stderr) == (result.status, result.stderr)


@pytest.mark.docker
@pytest.mark.parametrize("language", sorted(TESTS))
async def test_a_passing_test_file_is_ok(polyglot: Sandbox, language: str) -> None:
    result = await polyglot.run(
        TESTS[language][0], language, timeout=TIMEOUT, compile_timeout=COMPILE_TIMEOUT
    )
    assert (result.status, result.exit_code) == (Status.OK, 0), result
    assert REPORTS[language][0] in result.stdout + result.stderr, result


@pytest.mark.docker
@pytest.mark.parametrize("language", sorted(TESTS))
async def test_a_failing_test_file_is_the_runners_error(polyglot: Sandbox, language: str) -> None:
    result = await polyglot.run(
        TESTS[language][1], language, timeout=TIMEOUT, compile_timeout=COMPILE_TIMEOUT
    )
    assert result.status is Status.ERROR and result.exit_code != 0, result
    assert REPORTS[language][1] in result.stdout + result.stderr, result
    if language in COMPILED:  # it compiled: the failure is the run's
        assert result.compile is not None and result.compile.status is Status.OK


@pytest.mark.docker
async def test_php_code_without_its_opening_tag_gets_one(polyglot: Sandbox) -> None:
    result = await polyglot.run("<?php\necho 1 + 1;", "php")
    assert (result.status, result.stdout) == (Status.OK, "2")


@pytest.mark.docker
async def test_junit_names_the_file_after_the_public_class(polyglot: Sandbox) -> None:
    result = await polyglot.run(TESTS["junit"][0], "junit", timeout=TIMEOUT)
    assert "AdderTest" in result.stdout and "1 tests successful" in result.stdout, result


@pytest.mark.docker
async def test_scala_code_without_an_object_fails_to_compile(polyglot: Sandbox) -> None:
    result = await polyglot.run('println("hello")', "scala")
    assert result.status is Status.ERROR and result.compile is not None
    assert "no runnable class or object" in result.compile.stderr


@pytest.mark.docker
async def test_java_runs_with_assertions_enabled(polyglot: Sandbox) -> None:
    code = "public class Main { public static void main(String[] a) { assert 1 > 2; } }"
    result = await polyglot.run(code, "java", timeout=TIMEOUT)
    assert result.status is Status.ERROR and "AssertionError" in result.stderr


@pytest.mark.docker
async def test_stdin_reaches_a_compiled_program(polyglot: Sandbox) -> None:
    code = "use std::io::Read;\nfn main() { let mut s = String::new(); std::io::stdin().read_to_string(&mut s).unwrap(); print!(\"{}\", s.trim().len()); }"
    result = await polyglot.run(code, "rust", stdin="abcd\n", timeout=TIMEOUT)
    assert (result.status, result.stdout) == (Status.OK, "4"), result


@pytest.mark.docker
async def test_a_compiled_program_sees_the_work_dir_as_its_cwd(polyglot: Sandbox) -> None:
    await polyglot.write_files({"input.txt": "42\n"})
    code = 'package main\nimport ("fmt"; "os")\nfunc main() { b, _ := os.ReadFile("input.txt"); fmt.Print(string(b)) }'
    result = await polyglot.run(code, "go", timeout=TIMEOUT)
    assert (result.status, result.stdout) == (Status.OK, "42\n"), result
    listing = await polyglot.run("ls -A", "bash")
    assert listing.stdout == "input.txt\n"  # the go build cache went to the run's scratch dir


# --- what needs no polyglot image -------------------------------------------------------------


async def test_a_compile_phase_is_bounded_by_its_own_timeout(sandbox: Sandbox) -> None:
    if "cpp" not in sandbox.hello["languages"]:
        pytest.skip("this sandbox has no g++")
    # Constant evaluation the compiler would spend minutes on.
    code = (
        "constexpr long f() { long s = 0; for (long i = 0; i < 200000; i++)\n"
        "  for (long j = 0; j < 200000; j++) s += i ^ j; return s; }\n"
        "constexpr long v = f();\nint main() { return v & 0; }"
    )
    result = await sandbox.run(code, "cpp", timeout=30, compile_timeout=0.5)
    assert result.status is Status.TIMEOUT and result.compile is not None
    assert result.compile.status is Status.TIMEOUT and result.compile.duration_ms < 5000


async def test_a_compiled_program_runs_under_its_run_timeout_after_compiling(
    sandbox: Sandbox,
) -> None:
    if "cpp" not in sandbox.hello["languages"]:
        pytest.skip("this sandbox has no g++")
    code = "int main() { for (;;) {} }"
    result = await sandbox.run(code, "cpp", timeout=0.5, compile_timeout=30)
    assert result.status is Status.TIMEOUT
    assert result.compile is not None and result.compile.status is Status.OK


async def test_a_language_no_sandbox_can_have_is_refused_saying_why(sandbox: Sandbox) -> None:
    with pytest.raises(UnsupportedLanguage, match="needs a GPU"):
        await sandbox.run("print(1)", "python_gpu")


async def test_a_language_whose_programs_are_missing_is_refused_naming_them(
    sandbox: Sandbox,
) -> None:
    missing = [name for name in languages.TABLE if name not in sandbox.hello["languages"]]
    if not missing:
        pytest.skip("this sandbox has every language's programs")
    with pytest.raises(UnsupportedLanguage) as refused:
        await sandbox.run("x", missing[0])
    needs = languages.TABLE[missing[0]].needs
    assert "needs" in str(refused.value) and any(need in str(refused.value) for need in needs)


def test_doctor_names_the_languages_a_bubblewrap_sandbox_runs_here() -> None:
    from gem_sandbox.cli import doctor

    check = next(c for c in doctor.checks() if c.name == "languages")
    assert check.ok, check
    assert check.detail.startswith("bubblewrap sandboxes here run python, bash")
