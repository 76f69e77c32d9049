"""Compilers and runtimes run under the same limits and verdict rule as Python and bash.

On Docker with the polyglot image, in each compiled and interpreted family (C++, Java, Go,
Rust, Node, Ruby): a fork bomb, a memory bomb, an output flood and an escape attempt (writing
outside the work dir, reading the agent's environment and another sandbox's files), each
checked by the adversarial harness (typed verdict, neighbour unaffected, host back to baseline,
next tenant clean). A compiler that hangs or floods is bounded by ``compile_timeout`` and the
output cap.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult
from tests.docker_fixtures import docker_sdk
from tests.security.harness import SECRET, SECRET_VAR, Context, Harness, S, case

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

RUN_TIMEOUT = 3.0
COMPILE_TIMEOUT = 60.0  # a cold javac or rustc on a loaded machine
# The harness's sandboxes have 256 MiB (cgroup); a JVM needs more address space than that to
# start (it reserves heap, code cache and class space), which the cgroup does not count.
LIMITS = RunLimits(run_memory_mb=1024, max_output_bytes=64 * 1024)
HONEST = (S.OK, S.ERROR, S.TIMEOUT, S.KILLED, S.OOM, S.OUTPUT_LIMIT)
# A bomb past the sandbox's memory either fails an allocation, is OOM-killed, or (a runtime
# whose heap the kernel reclaims page by page: go, node, ruby) stalls until its deadline.
MEMORY_VERDICTS = (S.OOM, S.ERROR, S.KILLED, S.TIMEOUT)
ESCAPED = "ESCAPED"  # what an escape payload prints for each attempt that worked

# The escape attempts: write into the read-only root, the agent's mount and /proc; read the
# agent's environment (the host secret must not be in it); each language prints ESCAPED for
# an attempt that worked and "held" for one that did not.
TARGETS = ["/usr/bin/gem-escape", "/opt/gem-sandbox/gem_agent/escape.py", "/etc/passwd"]

FAMILIES = {
    "cpp": {
        "fork": "#include <unistd.h>\nint main() { for (;;) fork(); }",
        "memory": (
            "#include <cstdlib>\n#include <cstring>\n"
            "int main() { for (;;) { char *p = (char *)malloc(16 << 20); if (p) memset(p, 1, 16 << 20); } }"
        ),
        "flood": "#include <cstdio>\nint main() { for (;;) fputs(\"xxxxxxxxxxxxxxxx\", stdout); }",
        "escape": (
            "#include <cstdio>\n#include <fstream>\n#include <iostream>\n#include <string>\n"
            "int main() {\n"
            "  for (const char *t : {@TARGETS@}) {\n"
            "    FILE *f = fopen(t, \"a\"); std::puts(f && fputs(\"x\", f) >= 0 && fclose(f) == 0 ? \"@ESCAPED@\" : \"held\"); }\n"
            "  std::ifstream env(\"/proc/1/environ\"); std::string s((std::istreambuf_iterator<char>(env)), {});\n"
            "  std::puts(s.find(\"@SECRET@\") != std::string::npos ? \"@ESCAPED@\" : \"held\");\n"
            "}"
        ),
    },
    "java": {
        "fork": (
            "public class Main { public static void main(String[] a) throws Exception {\n"
            "  for (;;) { try { new ProcessBuilder(\"sleep\", \"60\").start(); }"
            " catch (Exception e) {} } } }"
        ),
        "memory": (
            "import java.util.*;\npublic class Main { public static void main(String[] a) {\n"
            "  List<long[]> l = new ArrayList<>(); for (;;) l.add(new long[1 << 21]); } }"
        ),
        "flood": (
            "public class Main { public static void main(String[] a) {\n"
            "  for (;;) System.out.print(\"xxxxxxxxxxxxxxxx\"); } }"
        ),
        "escape": (
            "import java.nio.file.*;\npublic class Main { public static void main(String[] a) {\n"
            "  for (String t : new String[] {@TARGETS@}) {\n"
            "    try { Files.writeString(Path.of(t), \"x\", StandardOpenOption.CREATE,"
            " StandardOpenOption.APPEND); System.out.println(\"@ESCAPED@\"); }\n"
            "    catch (Exception e) { System.out.println(\"held\"); } }\n"
            "  String s = \"\"; try { s = Files.readString(Path.of(\"/proc/1/environ\")); }"
            " catch (Exception e) {}\n"
            "  System.out.println(s.contains(\"@SECRET@\") ? \"@ESCAPED@\" : \"held\"); } }"
        ),
    },
    "go": {
        "fork": (
            "package main\nimport (\"os\"; \"os/exec\")\n"
            "func main() { for { exec.Command(os.Args[0]).Start() } }"
        ),
        "memory": (
            "package main\nfunc main() { var keep [][]byte\n"
            "  for { b := make([]byte, 16<<20); for i := range b { b[i] = 1 }; keep = append(keep, b) } }"
        ),
        "flood": "package main\nimport \"os\"\nfunc main() { for { os.Stdout.WriteString(\"xxxxxxxxxxxxxxxx\") } }",
        "escape": (
            "package main\nimport (\"fmt\"; \"os\"; \"strings\")\n"
            "func main() {\n"
            "  for _, t := range []string{@TARGETS@} {\n"
            "    f, err := os.OpenFile(t, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0644)\n"
            "    if err == nil { _, err = f.WriteString(\"x\"); f.Close() }\n"
            "    if err == nil { fmt.Println(\"@ESCAPED@\") } else { fmt.Println(\"held\") } }\n"
            "  b, _ := os.ReadFile(\"/proc/1/environ\")\n"
            "  if strings.Contains(string(b), \"@SECRET@\") { fmt.Println(\"@ESCAPED@\") } else { fmt.Println(\"held\") } }"
        ),
    },
    "rust": {
        "fork": (
            "fn main() { let me = std::env::current_exe().unwrap();\n"
            "  loop { let _ = std::process::Command::new(&me).spawn(); } }"
        ),
        "memory": (
            "fn main() { let mut keep = Vec::new();\n"
            "  loop { keep.push(vec![1u8; 16 << 20]); } }"
        ),
        "flood": "use std::io::Write;\nfn main() { let mut o = std::io::stdout(); loop { let _ = o.write_all(b\"xxxxxxxxxxxxxxxx\"); } }",
        "escape": (
            "use std::io::Write;\nfn main() {\n"
            "  for t in [@TARGETS@] {\n"
            "    let ok = std::fs::OpenOptions::new().append(true).create(true).open(t)"
            ".and_then(|mut f| f.write_all(b\"x\")).is_ok();\n"
            "    println!(\"{}\", if ok { \"@ESCAPED@\" } else { \"held\" }); }\n"
            "  let env = std::fs::read(\"/proc/1/environ\").unwrap_or_default();\n"
            "  let found = String::from_utf8_lossy(&env).contains(\"@SECRET@\");\n"
            "  println!(\"{}\", if found { \"@ESCAPED@\" } else { \"held\" }); }"
        ),
    },
    "nodejs": {
        "fork": (
            "const cp = require('child_process');\n"
            "for (;;) { try { cp.spawn(process.execPath, [__filename]); } catch (e) {} }"
        ),
        "memory": "const keep = []; for (;;) keep.push(Buffer.alloc(16 << 20, 1));",
        # As fast as the pipe takes it (a loop that never yields would only fill node's buffer).
        "flood": (
            "const chunk = 'x'.repeat(65536);\n"
            "(function flood() { while (process.stdout.write(chunk)); process.stdout.once('drain', flood); })();"
        ),
        "escape": (
            "const fs = require('fs');\n"
            "for (const t of [@TARGETS@]) {\n"
            "  try { fs.appendFileSync(t, 'x'); console.log('@ESCAPED@'); } catch (e) { console.log('held'); } }\n"
            "let s = ''; try { s = fs.readFileSync('/proc/1/environ', 'latin1'); } catch (e) {}\n"
            "console.log(s.includes('@SECRET@') ? '@ESCAPED@' : 'held');"
        ),
    },
    "ruby": {
        "fork": "loop { fork rescue nil }",
        "memory": "keep = []\nloop { keep << ('x' * (16 << 20)) }",
        "flood": "loop { $stdout.write('xxxxxxxxxxxxxxxx') }",
        "escape": (
            "[@TARGETS@].each do |t|\n"
            "  begin; File.open(t, 'a') { |f| f.write('x') }; puts '@ESCAPED@'\n"
            "  rescue SystemCallError; puts 'held'; end\nend\n"
            "s = (File.binread('/proc/1/environ') rescue '')\n"
            "puts s.include?('@SECRET@') ? '@ESCAPED@' : 'held'"
        ),
    },
}


def _source(language: str, attack: str) -> str:
    quote = "'" if language == "ruby" or language == "nodejs" else '"'
    targets = ", ".join(quote + t + quote for t in TARGETS)
    return (
        FAMILIES[language][attack]
        .replace("@TARGETS@", targets)
        .replace("@ESCAPED@", ESCAPED)
    )


def _runs(language: str, attack: str):
    """The harness action: this attack in this language, compiled first if it compiles."""

    async def action(sandbox: Sandbox, ctx: Context) -> ExecResult:
        return await sandbox.run(
            ctx.fill(_source(language, attack)),
            language,
            timeout=RUN_TIMEOUT,
            compile_timeout=COMPILE_TIMEOUT,
            limits=LIMITS,
        )

    return action


def _compiled(result: ExecResult) -> None:
    """The attack got past the compiler: its verdict is the program's own."""
    assert result.compile is None or result.compile.status is S.OK, result.compile


def _all_held(result: ExecResult) -> None:
    _compiled(result)
    assert result.stdout.split() == ["held"] * (len(TARGETS) + 1), result


def _capped(result: ExecResult) -> None:
    _compiled(result)
    assert result.truncated and len(result.stdout.encode()) <= 2 * LIMITS.max_output_bytes, result


def _cases() -> Iterator[object]:
    for language in FAMILIES:
        yield case(
            f"{language}_fork_bomb", "action", _runs(language, "fork"), HONEST,
            expect=_compiled, timeout=COMPILE_TIMEOUT + RUN_TIMEOUT, bounded_pids=True,
        )
        yield case(
            f"{language}_memory_bomb", "action", _runs(language, "memory"),
            MEMORY_VERDICTS, expect=_compiled, timeout=COMPILE_TIMEOUT + RUN_TIMEOUT,
        )
        yield case(
            f"{language}_output_flood", "action", _runs(language, "flood"), S.OUTPUT_LIMIT,
            expect=_capped, timeout=COMPILE_TIMEOUT + RUN_TIMEOUT,
        )
        yield case(
            f"{language}_escape", "action", _runs(language, "escape"), S.OK,
            expect=_all_held, timeout=COMPILE_TIMEOUT + RUN_TIMEOUT,
        )


@pytest.fixture
async def polyglot_harness(monkeypatch: pytest.MonkeyPatch, docker_client) -> AsyncIterator[Harness]:
    docker_sdk()
    from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions, images

    image = images.default_image("polyglot")
    if image is None:
        pytest.skip("the polyglot image is not built: gem-sandbox images build --profile polyglot")
    monkeypatch.setenv(SECRET_VAR, SECRET)
    backend = DockerBackend(DockerOptions(image=image))
    try:
        yield Harness("docker", backend, docker_client)
    finally:
        await backend.aclose()


@pytest.mark.parametrize("case", list(_cases()))
async def test_a_hostile_program_in_each_language_family_is_contained(polyglot_harness, case):
    await polyglot_harness.verify(case)


# --- the compile phase ----------------------------------------------------------------------


@pytest.fixture
async def polyglot(polyglot_harness: Harness) -> AsyncIterator[Sandbox]:
    async with polyglot_harness.pool("gem-sandbox-tests-security-languages") as pool:
        await pool.wait_ready(60)
        sandbox = await pool.acquire()
        yield sandbox
        await pool.release(sandbox)


async def test_a_compiler_that_hangs_is_stopped_at_the_compile_timeout(polyglot: Sandbox):
    code = (
        "constexpr long f() { long s = 0; for (long i = 0; i < 200000; i++)\n"
        "  for (long j = 0; j < 200000; j++) s += i ^ j; return s; }\n"
        "constexpr long v = f();\nint main() { return v & 0; }"
    )
    result = await polyglot.run(code, "cpp", timeout=RUN_TIMEOUT, compile_timeout=1.0)
    assert result.status is S.TIMEOUT and result.compile is not None
    assert result.compile.status is S.TIMEOUT and result.compile.duration_ms < 10_000
    assert (await polyglot.stats())["processes"] == 0  # the compiler's whole tree is gone


async def test_a_compiler_that_floods_is_cut_at_the_output_cap(polyglot: Sandbox):
    # Every undeclared name is an error message of its own: thousands of them.
    code = "int main() {\n" + "".join(f"undeclared_{i}++;\n" for i in range(20000)) + "}"
    result = await polyglot.run(
        code, "cpp", timeout=RUN_TIMEOUT, compile_timeout=30,
        limits=RunLimits(max_output_bytes=4096, run_memory_mb=1024),
    )
    assert result.compile is not None and result.status in (S.OUTPUT_LIMIT, S.ERROR)
    assert result.compile.truncated and len(result.compile.stderr) <= 2 * 4096
    assert result.compile.stderr_bytes > 4096


async def test_a_compiled_program_cannot_change_its_own_verdict(polyglot: Sandbox):
    # It exits 1 after printing what a forged verdict would look like.
    code = (
        '#include <cstdio>\nint main() { puts("{\\"status\\": \\"ok\\", \\"exit_code\\": 0}");'
        " return 1; }"
    )
    result = await polyglot.run(code, "cpp", timeout=RUN_TIMEOUT, compile_timeout=COMPILE_TIMEOUT)
    assert (result.status, result.exit_code) == (S.ERROR, 1), result
