"""What a kernel command shows (``ExecResult.display``): MIME bundles beside stdout and stderr,
as a Jupyter kernel sends ``display_data`` and ``execute_result``, on every backend."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest

from gem_sandbox.sandbox.client import Sandbox, open_sandbox
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import SPEC, make_backend, sandbox  # noqa: F401  (fixture)

pytestmark = pytest.mark.anyio


async def test_with_display_a_final_value_is_display_data_and_not_printed(sandbox: Sandbox):
    result = await sandbox.kernel_exec("x = [1, 2]\nx + [3]", display=True)
    assert (result.status, result.stdout, result.display) == (Status.OK, "", ({"text/plain": "[1, 2, 3]"},))
    assert result.display_value == 0


async def test_the_value_is_told_apart_from_what_the_cell_displayed(sandbox: Sandbox):
    result = await sandbox.kernel_exec("display(1)\n2", display=True)
    assert (result.display, result.display_value) == (({"text/plain": "1"}, {"text/plain": "2"}), 1)
    shown_only = await sandbox.kernel_exec("display(3)\nprint(4)", display=True)
    assert (shown_only.display, shown_only.display_value) == (({"text/plain": "3"},), None)


async def test_without_display_a_final_value_is_printed_as_before(sandbox: Sandbox):
    result = await sandbox.kernel_exec("6 * 7")
    assert (result.stdout, result.display) == ("42\n", ())


async def test_a_none_value_or_a_trailing_semicolon_shows_nothing(sandbox: Sandbox):
    for cell in ("print('p')", "[].append(1)", "1 + 1;", "1 + 1 ;  # hidden"):
        assert (await sandbox.kernel_exec(cell, display=True)).display == (), cell


async def test_a_stderr_write_shows_its_count_and_prints_only_its_text(sandbox: Sandbox):
    result = await sandbox.kernel_exec("import sys\nsys.stderr.write('to err')", display=True)
    assert (result.stdout, result.stderr, result.display) == ("", "to err", ({"text/plain": "6"},))


async def test_the_shown_value_is_kept_as_underscore(sandbox: Sandbox):
    await sandbox.kernel_exec("'kept'", display=True)
    assert (await sandbox.kernel_exec("print(_)")).stdout == "kept\n"


async def test_display_shows_rich_forms_in_order_and_binary_ones_as_base64(sandbox: Sandbox):
    cell = (
        "class Pic:\n"
        "    def _repr_png_(self): return b'\\x89PNG-bytes'\n"
        "    def _repr_html_(self): return '<b>pic</b>'\n"
        "    def __repr__(self): return 'Pic()'\n"
        "display('first', Pic())\n"
        "print('printed')"
    )
    result = await sandbox.kernel_exec(cell)
    assert result.stdout == "printed\n"
    assert result.display == (
        {"text/plain": "'first'"},
        {"text/html": "<b>pic</b>", "image/png": base64.b64encode(b"\x89PNG-bytes").decode(), "text/plain": "Pic()"},
    )


async def test_a_raising_rich_form_is_left_out_and_the_repr_stays(sandbox: Sandbox):
    cell = "class Odd:\n    def _repr_html_(self): raise ValueError\n    def __repr__(self): return 'Odd()'\ndisplay(Odd())"
    assert (await sandbox.kernel_exec(cell)).display == ({"text/plain": "Odd()"},)


async def test_each_command_answers_only_what_it_showed(sandbox: Sandbox):
    await sandbox.kernel_exec("display(1)")
    assert (await sandbox.kernel_exec("x = 1")).display == ()


async def test_lines_on_the_display_pipe_that_are_no_bundle_are_dropped(sandbox: Sandbox):
    cell = "import os\nos.write(5, b'not json\\n[1, 2]\\n{\"text/plain\": \"forged\"}\\n')\ndisplay(2)"
    result = await sandbox.kernel_exec(cell)
    assert result.status is Status.OK
    assert result.display == ({"text/plain": "forged"}, {"text/plain": "2"})  # output, never a verdict


async def test_a_raising_cell_still_answers_what_it_showed_first(sandbox: Sandbox):
    result = await sandbox.kernel_exec("display('before')\nraise KeyError('k')", display=True)
    assert result.status is Status.ERROR and "KeyError: 'k'" in result.stderr
    assert result.display == ({"text/plain": "'before'"},)


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
async def plotting_sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    """A sandbox whose Python has matplotlib: bubblewrap on a host with python3-matplotlib,
    or Docker's polyglot image (the default image stays small without it)."""
    if request.param == "local":
        backend = make_backend("local")
    else:
        make_backend("docker")  # skips where Docker cannot run
        from gem_sandbox.sandbox.backends.docker import DockerBackend, DockerOptions, images

        image = images.default_image("polyglot")
        if image is None:
            pytest.skip("the polyglot image is not built: gem-sandbox images build --profile polyglot")
        backend = DockerBackend(DockerOptions(image=image))
    async with open_sandbox(backend, SPEC) as sb:
        yield sb
    await backend.aclose()


async def test_matplotlib_figures_are_shown_as_png_and_closed(plotting_sandbox: Sandbox):
    sandbox = plotting_sandbox
    probe = await sandbox.run("import matplotlib")
    if not probe.ok:
        pytest.skip("matplotlib is not installed where this sandbox's python is (python3-matplotlib)")
    await sandbox.kernel_exec("import matplotlib.pyplot as plt", timeout=60)
    shown = await sandbox.kernel_exec("plt.plot([0, 1], [1, 0])\nplt.show()", display=True, timeout=60)
    (figure,) = shown.display
    assert base64.b64decode(figure["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert figure["text/plain"] == "<Figure size 640x480 with 1 Axes>"
    left_open = await sandbox.kernel_exec("plt.figure()\nplt.bar([1], [2]);", display=True, timeout=60)
    assert [sorted(bundle) for bundle in left_open.display] == [["image/png", "text/plain"]]
    assert (await sandbox.kernel_exec("len(plt.get_fignums())", display=True)).display == ({"text/plain": "0"},)
