"""The embedded search index of a QA env's own corpus, built once and shared.

An env whose questions are about a corpus it ships (gem-sandbox's fictional world) or is given
(``corpus=``) exposes the index as ``search_index``, and the ``search_tool`` wrappers search it
with no server (see :mod:`gem_sandbox.wrappers.wrapper_factory`). The index is built with
:func:`gem_sandbox.search.build_index` into ``$XDG_CACHE_HOME/gem-sandbox/search`` (by default
``~/.cache/gem-sandbox/search``; the system's temporary directory when that is not writable),
named by a digest of the corpus, so a changed corpus gets a new index and an unchanged one is
built once for every process. Each build goes to a private temporary file renamed into place,
so processes building the same index at once never see a half-built one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

from gem_sandbox.search.index import build_index

_built: dict[tuple[str, str], Path] = {}  # (cache dir, digest) -> index, for this process
_digests: dict[tuple[str, int, int], str] = {}  # (corpus, mtime, size) -> digest: hash each file once
_lock = threading.Lock()


def _digest(corpus: Path) -> str:
    stat = corpus.stat()
    key = (str(corpus.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _digests:
        sha = hashlib.sha256()
        with corpus.open("rb") as data:
            for block in iter(lambda: data.read(1 << 20), b""):
                sha.update(block)
        _digests[key] = sha.hexdigest()[:20]
    return _digests[key]


def cache_dir() -> Path:
    """Where indexes are kept: ``$XDG_CACHE_HOME/gem-sandbox/search``, else under the temp dir."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gem-sandbox" / "search"
    try:
        base.mkdir(parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    fallback = Path(tempfile.gettempdir()) / f"gem-sandbox-search-{os.getuid()}"
    fallback.mkdir(mode=0o700, exist_ok=True)
    if fallback.is_symlink() or fallback.stat().st_uid != os.getuid():
        raise PermissionError(f"{fallback} belongs to another user; set XDG_CACHE_HOME to a directory of yours")
    return fallback


def corpus_index(corpus: str | os.PathLike[str]) -> Path:
    """The path of the built index of ``corpus`` (a Search-R1 ``.jsonl``), building it if needed."""
    corpus = Path(corpus)
    directory = cache_dir()
    with _lock:
        digest = _digest(corpus)
        key = (str(directory), digest)
        if key in _built and _built[key].is_file():
            return _built[key]
        index = directory / f"{corpus.stem}-{digest}.db"
        if not index.is_file():
            with tempfile.TemporaryDirectory(dir=directory, prefix=".building-") as private:
                side = Path(private) / index.name
                build_index(corpus, side)
                os.replace(side, index)  # atomic: readers see no index or a whole one
        _built[key] = index
        return index
