"""Every language the sandboxes serve, through SandboxFusion's ``/run_code`` as its own client
(the ``sandbox-fusion`` package, unmodified) sends it, on Docker with the polyglot image.

Per language: a program that reads two numbers from stdin and prints their sum (SandboxFusion's
stdin-stdout judging), and, for a compiled language, a program its compiler rejects, which
fails in ``compile_result`` with no ``run_result``. Per test-runner language: a passing and a
failing test file, judged by the runner's exit status. The polyglot image is built by
``gem-sandbox images build --profile polyglot`` (CI builds it); without it these tests skip.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator

import anyio.to_thread
import pytest

from gem_sandbox.agent import languages
from gem_sandbox.service.state import Service
from tests.docker_fixtures import docker_client, docker_sdk  # noqa: F401 - fixtures
from tests.service_fixtures import ALPHA, serving

sandbox_fusion = pytest.importorskip("sandbox_fusion", reason="needs the sandbox-fusion package: pip install -e '.[test]'")
pytestmark = [pytest.mark.anyio, pytest.mark.docker]

TIMEOUT = 60  # seconds to compile or run: a cold JVM compiler on a loaded 2-core machine takes many
STDIN = "2 3\n"
# language -> a program printing the sum of the two numbers on its stdin ("5"); a Verilog
# testbench is the module named tb, as SandboxFusion runs it
SUMS = {
    "python": "a, b = map(int, input().split())\nprint(a + b)",
    "bash": "read a b\necho $((a + b))",
    "cpp": "#include <iostream>\nint main() { int a, b; std::cin >> a >> b; std::cout << a + b << '\\n'; }",
    "nodejs": 'const [a, b] = require("fs").readFileSync(0, "utf8").trim().split(/\\s+/).map(Number);\nconsole.log(a + b);',
    "typescript": (
        'import * as fs from "fs";\n'
        'const [a, b]: number[] = fs.readFileSync(0, "utf8").trim().split(/\\s+/).map(Number);\n'
        "console.log(a + b);"
    ),
    "go": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tvar a, b int\n\tfmt.Scan(&a, &b)\n\tfmt.Println(a + b)\n}',
    "java": (
        "import java.util.Scanner;\n"
        "public class Main {\n"
        "  public static void main(String[] args) {\n"
        "    Scanner in = new Scanner(System.in);\n"
        "    System.out.println(in.nextInt() + in.nextInt());\n"
        "  }\n"
        "}"
    ),
    "scala": (
        "object Main {\n"
        "  def main(args: Array[String]): Unit = {\n"
        '    val Array(a, b) = scala.io.StdIn.readLine().trim.split(" ").map(_.toInt)\n'
        "    println(a + b)\n"
        "  }\n"
        "}"
    ),
    "kotlin_script": 'val (a, b) = readLine()!!.trim().split(" ").map { it.toInt() }\nprintln(a + b)',
    "csharp": (
        "using System;\n"
        "class Program {\n"
        "  static void Main() {\n"
        "    var parts = Console.ReadLine().Split(' ');\n"
        "    Console.WriteLine(int.Parse(parts[0]) + int.Parse(parts[1]));\n"
        "  }\n"
        "}"
    ),
    "php": "<?php\n[$a, $b] = array_map('intval', explode(' ', trim(fgets(STDIN))));\necho $a + $b, \"\\n\";",
    "rust": (
        "use std::io::Read;\n"
        "fn main() {\n"
        "    let mut text = String::new();\n"
        "    std::io::stdin().read_to_string(&mut text).unwrap();\n"
        "    let sum: i64 = text.split_whitespace().map(|n| n.parse::<i64>().unwrap()).sum();\n"
        '    println!("{}", sum);\n'
        "}"
    ),
    "sql": "SELECT 2 + 3;",  # SQLite reads no stdin: the sum is in the query
    "lua": 'local a, b = io.read("n", "n")\nprint(a + b)',
    "R": 'x <- scan(file("stdin"), quiet = TRUE)\ncat(sum(x), "\\n", sep = "")',
    "perl": "my ($a, $b) = split ' ', <STDIN>;\nprint $a + $b, \"\\n\";",
    "ruby": "a, b = gets.split.map(&:to_i)\nputs a + b",
    "verilog": 'module tb;\n  initial begin\n    $display("%0d", 2 + 3);\n    $finish;\n  end\nendmodule',
    "racket": "#lang racket\n(define a (read))\n(define b (read))\n(displayln (+ a b))",
}
# test-runner language -> (a test file that passes, one that fails)
RUNNERS = {
    "pytest": ("def test_sum():\n    assert 2 + 3 == 5\n", "def test_sum():\n    assert 2 + 3 == 6\n"),
    "go_test": (
        'package main\n\nimport "testing"\n\nfunc TestSum(t *testing.T) {\n\tif 2+3 != 5 {\n\t\tt.Fatal("sum")\n\t}\n}',
        'package main\n\nimport "testing"\n\nfunc TestSum(t *testing.T) {\n\tif 2+3 != 6 {\n\t\tt.Fatal("sum")\n\t}\n}',
    ),
    "junit": (
        "import org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.assertEquals;\n"
        "public class SumTest { @Test void sums() { assertEquals(5, 2 + 3); } }",
        "import org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.assertEquals;\n"
        "public class SumTest { @Test void sums() { assertEquals(6, 2 + 3); } }",
    ),
    "jest": (
        'test("sums", () => { expect(2 + 3).toBe(5); });',
        'test("sums", () => { expect(2 + 3).toBe(6); });',
    ),
    "D_ut": ("unittest { assert(2 + 3 == 5); }\nvoid main() {}", "unittest { assert(2 + 3 == 6); }\nvoid main() {}"),
}
COMPILED = sorted(name for name in SUMS if name in languages.TABLE and languages.TABLE[name].compile)
NOT_CODE = "\n#!@ this line is no statement of any language !@#\n"


def test_every_language_of_the_agent_is_tried_here() -> None:
    assert set(SUMS) | set(RUNNERS) == {"python", *languages.TABLE}


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


@pytest.fixture(scope="module")
async def polyglot_service(polyglot_image: str, docker_client) -> AsyncIterator[Service]:  # noqa: F811
    async with serving("docker", polyglot_image) as running_service:
        yield running_service


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # the module-scoped service lives in one event loop


async def run_code(service: Service, **request: object):
    call = functools.partial(
        sandbox_fusion.run_code,
        sandbox_fusion.RunCodeRequest(compile_timeout=TIMEOUT, run_timeout=TIMEOUT, **request),
        endpoint=f"{service.url}/t/{ALPHA.secret}",
        max_attempts=1,
    )
    return await anyio.to_thread.run_sync(call)


@pytest.mark.parametrize("language", sorted(SUMS))
async def test_a_program_reads_stdin_and_prints_its_answer(polyglot_service: Service, language: str) -> None:
    response = await run_code(polyglot_service, code=SUMS[language], language=language, stdin=STDIN)
    assert response.status == sandbox_fusion.RunStatus.Success, response
    assert (response.run_result.return_code, response.run_result.stdout.strip()) == (0, "5")
    compiled = languages.TABLE.get(language) is not None and languages.TABLE[language].compile is not None
    assert (response.compile_result is not None) == compiled
    if compiled:
        assert (response.compile_result.status, response.compile_result.return_code) == ("Finished", 0)


@pytest.mark.parametrize("language", COMPILED)
async def test_a_compile_error_fails_in_compile_result_and_nothing_runs(polyglot_service: Service, language: str) -> None:
    response = await run_code(polyglot_service, code=SUMS[language] + NOT_CODE, language=language, stdin=STDIN)
    assert response.status == sandbox_fusion.RunStatus.Failed, response
    assert response.compile_result.status == "Finished" and response.compile_result.return_code != 0
    assert response.run_result is None
    mapping = sandbox_fusion.SummaryMapping(CompileFailed="compile failed")
    assert sandbox_fusion.summary_run_code_result(response, mapping) == "compile failed"


@pytest.mark.parametrize("language", sorted(RUNNERS))
async def test_a_test_runner_passes_a_passing_test_and_fails_a_failing_one(polyglot_service: Service, language: str) -> None:
    passing, failing = RUNNERS[language]
    passed = await run_code(polyglot_service, code=passing, language=language)
    assert passed.status == sandbox_fusion.RunStatus.Success, passed
    failed = await run_code(polyglot_service, code=failing, language=language)
    assert failed.status == sandbox_fusion.RunStatus.Failed, failed
    assert (failed.run_result or failed.compile_result).return_code != 0
