"""The languages a run can be in, besides Python (which runs in the forked interpreter itself).

They follow SandboxFusion's ``/run_code``: each language's source goes into a file of the
run's own scratch dir, named as its toolchain expects (``Main.java``, a ``.kts`` script, a
JUnit class's own name); a compiled language is compiled once, in a phase of its own with its
own timeout and result (SandboxFusion's ``compile_result``), and then run; a test-runner
language (``pytest``, ``go_test``, ``junit``, ``jest``, ``D_ut``) runs its runner, whose exit
status is the verdict. ``prepare`` steps (a TypeScript transpile, a C# compile) run inside the
run phase, as SandboxFusion runs them inside its run command.

A language is served when every program it needs is on the sandbox's ``PATH``; the rest are
refused as ``unsupported_language`` with what is missing. :data:`UNAVAILABLE` names the ones
SandboxFusion serves that no sandbox here can have, and why.

In argv templates ``{dir}`` is the scratch dir, ``{src}`` the source file, ``{entry}`` the
class or object a JVM language runs and ``{heap}`` the Java heap in MiB: a quarter of the run's
memory limit. A JVM reserves address space, which the run's RLIMIT_AS counts, for far more
than its heap: code cache and class space (capped by :data:`JVM_FLAGS`), metaspace, a stack
per thread, the mapped module image (130 MB) and malloc arenas. Under the default 1024 MiB
kotlinc, the largest of them, starts with a 256 MiB heap and fails with 512.
"""

import os
import re

JVM_FLAGS = [
    "-Xmx{heap}m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:ReservedCodeCacheSize=64m",
    "-XX:CompressedClassSpaceSize=64m",
    "-XX:MaxMetaspaceSize=192m",
]
MIN_HEAP_MB = 64
JUNIT_JAR = "/usr/share/java/junit-platform-console-standalone.jar"

# Reads {src} (TypeScript), writes the JavaScript next to it; syntax errors fail it, type
# errors do not (as tsx, which SandboxFusion runs, does not check types).
_TRANSPILE = r"""
const ts = require("typescript"), fs = require("fs");
const [src, out] = process.argv.slice(1);
const r = ts.transpileModule(fs.readFileSync(src, "utf8"), {
  fileName: src, reportDiagnostics: true,
  compilerOptions: {module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2020},
});
for (const d of r.diagnostics) {
  const at = d.file ? d.file.getLineAndCharacterOfPosition(d.start) : null;
  const where = at ? src + ":" + (at.line + 1) + ":" + (at.character + 1) + ": " : "";
  console.error(where + ts.flattenDiagnosticMessageText(d.messageText, "\n"));
}
if (r.diagnostics.length) process.exit(1);
fs.writeFileSync(out, r.outputText);
"""

_PLACEHOLDER = re.compile(r"\{(dir|src|entry|heap)\}")
_JAVA_PUBLIC_CLASS = re.compile(r"public\s+(?:(?:final|abstract)\s+)*class\s+(\w+)")
_SCALA_OBJECT = re.compile(r"\bobject\s+(\w+)")


class Language:
    """How one language's code is laid out, compiled and run."""

    def __init__(self, name, source, run, compile=None, prepare=(), env=None, entry=None,
                 needs=(), code=None):
        self.name = name
        self.source = source  # the source file's name in the scratch dir
        self.run = run  # argv template of the run
        self.compile = compile  # argv template of the compile phase, if it has one
        self.prepare = list(prepare)  # argv templates run before ``run``, in its phase
        self.env = dict(env or {})  # templates, added to the run's environment
        self.entry = entry  # code -> the class or object to run (None: not found)
        self.code = code  # code -> the source as written (PHP's opening tag)
        programs = [argv[0] for argv in [run, compile, *self.prepare] if argv]
        self.needs = [p for p in programs if "{" not in p] + list(needs)

    def missing(self, programs):
        """The programs and files it needs that this sandbox lacks."""
        return [need for need in self.needs if need not in programs]

    def orders(self, code, scratch, programs, memory_mb):
        """``(files, compile argv or None, prepare argvs, run argv, env)`` of one run, or a
        ``str``: why the code cannot be compiled (a Scala file without an ``object``)."""
        entry = self.entry(code) if self.entry else None
        if self.entry and entry is None:
            return "%s: no runnable class or object found in the code" % self.name
        heap = max(MIN_HEAP_MB, memory_mb // 4) if memory_mb > 0 else 1024
        names = {"dir": scratch, "entry": entry, "heap": str(heap)}
        source = _fill(self.source, names)
        names["src"] = os.path.join(scratch, source)

        def expand(argv):
            argv = [_fill(arg, names) for arg in _flat(argv)]
            return [programs.get(argv[0], argv[0])] + argv[1:]

        text = self.code(code) if self.code else code
        env = dict((key, _fill(value, names)) for key, value in self.env.items())
        compile_argv = expand(self.compile) if self.compile else None
        return {source: text}, compile_argv, [expand(a) for a in self.prepare], expand(self.run), env


def _fill(template, names):
    return _PLACEHOLDER.sub(lambda m: names.get(m.group(1), m.group(0)), template)


def _flat(argv):
    """Expand the ``{jvm}`` item into the JVM's flags (``{jvm-J}``: as javac passes them)."""
    out = []
    for arg in argv:
        if arg == "{jvm}":
            out += JVM_FLAGS
        elif arg == "{jvm-J}":
            out += ["-J" + flag for flag in JVM_FLAGS]
        else:
            out.append(arg)
    return out


def _php(code):
    return code if "<?php" in code else "<?php\n" + code


def _junit_class(code):
    match = _JAVA_PUBLIC_CLASS.search(code)
    return match.group(1) if match else "Main"


def _scala_object(code):
    match = _SCALA_OBJECT.search(code)
    return match.group(1) if match else None


_GO_ENV = {"GOCACHE": "{dir}/.cache/go", "GOPATH": "{dir}/.go", "GO111MODULE": "off"}
_JVM_ENV = {"JAVA_OPTS": " ".join(JVM_FLAGS)}  # read by the scala and kotlinc launchers

TABLE = dict(
    (language.name, language)
    for language in [
        Language("bash", "main.sh", ["bash", "{src}"]),
        Language("pytest", "test_main.py",
                 ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "{src}"],
                 needs=["pytest"]),
        Language("cpp", "main.cpp", ["{dir}/main"],
                 compile=["g++", "-O2", "-std=c++17", "-o", "{dir}/main", "{src}"]),
        Language("nodejs", "main.js", ["node", "{src}"]),
        Language("typescript", "main.ts", ["node", "{dir}/main.js"],
                 prepare=[["node", "-e", _TRANSPILE, "{src}", "{dir}/main.js"]],
                 needs=["tsc"]),
        Language("jest", "main.ts",
                 ["jest", "--ci", "--runInBand", "--config",
                  '{"rootDir": "{dir}", "cacheDirectory": "{dir}/.cache", "watchman": false}'],
                 prepare=[["node", "-e", _TRANSPILE, "{src}", "{dir}/main.test.js"]],
                 needs=["tsc"]),
        Language("go", "main.go", ["{dir}/main"],
                 compile=["go", "build", "-o", "{dir}/main", "{src}"], env=_GO_ENV),
        Language("go_test", "main_test.go", ["go", "test", "{src}"], env=_GO_ENV),
        Language("java", "Main.java", ["java", "{jvm}", "-cp", "{dir}", "-ea", "Main"],
                 compile=["javac", "{jvm-J}", "-d", "{dir}", "{src}"]),
        Language("junit", "{entry}.java",
                 ["java", "{jvm}", "-jar", JUNIT_JAR, "--disable-banner",
                  "--class-path", "{dir}", "--scan-class-path"],
                 compile=["javac", "{jvm-J}", "-cp", JUNIT_JAR, "-d", "{dir}", "{src}"],
                 entry=_junit_class, needs=[JUNIT_JAR]),
        Language("scala", "main.scala", ["scala", "-cp", "{dir}", "{entry}"],
                 compile=["scalac", "-d", "{dir}", "{src}"], env=_JVM_ENV, entry=_scala_object),
        Language("kotlin_script", "main.kts", ["kotlinc", "-script", "{src}"], env=_JVM_ENV),
        Language("csharp", "Program.cs", ["mono", "{dir}/Program.exe"],
                 prepare=[["mcs", "-out:{dir}/Program.exe", "{src}"]]),
        Language("php", "main.php", ["php", "-f", "{src}"], code=_php),
        Language("rust", "main.rs", ["{dir}/main"], compile=["rustc", "{src}", "-o", "{dir}/main"]),
        Language("sql", "main.sql", ["sqlite3", "-bail", "-batch", "{dir}/main.db", ".read {src}"]),
        Language("lua", "main.lua", ["lua", "{src}"]),
        Language("R", "main.R", ["Rscript", "{src}"]),
        Language("perl", "main.pl", ["perl", "{src}"]),
        Language("ruby", "main.rb", ["ruby", "{src}"]),
        Language("D_ut", "main.d", ["{dir}/main"],
                 compile=["ldc2", "-unittest", "-of={dir}/main", "-od={dir}", "{src}"]),
        Language("verilog", "main.sv", ["vvp", "-n", "{dir}/main.vvp"],
                 compile=["iverilog", "-Wall", "-Winfloop", "-Wno-timescale", "-g2012",
                          "-s", "tb", "-o", "{dir}/main.vvp", "{src}"]),
        Language("racket", "main.rkt", ["racket", "{src}"]),
    ]
)

# SandboxFusion's languages that no sandbox here can serve, and why.
UNAVAILABLE = {
    "julia": "Debian bookworm has no julia package",
    "swift": "Debian bookworm has no Swift toolchain (swiftlang is packaged from trixie on)",
    "lean": "Lean 4 and its lake build tool are not packaged by Debian",
    "cuda": "it needs a GPU and the CUDA toolkit; sandboxes have neither",
    "python_gpu": "it needs a GPU; sandboxes have none",
}


def find_programs(path):
    """``{program or file: its path}`` of everything the table needs that exists here (an
    absolute need must exist; a name is looked up on ``path`` as ``shutil.which`` does, which
    the agent does not import: 0.8 MB of every sandbox's memory)."""
    found = {}
    for language in TABLE.values():
        for need in language.needs:
            if need in found:
                continue
            if os.path.isabs(need):
                if os.path.isfile(need):
                    found[need] = need
                continue
            for where in (os.path.join(d, need) for d in path.split(os.pathsep)):
                if os.path.isfile(where) and os.access(where, os.X_OK):
                    found[need] = where
                    break
    return found


def served(programs):
    """The languages these programs serve, Python first."""
    return ["python"] + [name for name, lang in TABLE.items() if not lang.missing(programs)]


def why_not(name, programs):
    """Why ``name`` cannot run here, for an ``unsupported_language`` refusal."""
    if name in UNAVAILABLE:
        return "%r cannot run in this sandbox: %s" % (name, UNAVAILABLE[name])
    language = TABLE.get(name)
    if language is None:
        return "%r is not a language gem-sandbox knows; it knows python, %s" % (
            name, ", ".join(TABLE))
    return "%r needs %s, which this sandbox does not have (the polyglot image has it)" % (
        name, ", ".join(language.missing(programs)))
