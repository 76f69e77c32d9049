"""An embedded BM25 index: SQLite FTS5 over a Search-R1 JSONL corpus, no server needed.

A corpus line is ``{"id": ..., "contents": "Title\\nbody text"}``. FTS5 ships with Python's
sqlite3, ranks with ``bm25()``, and keeps the index in one file that many readers can share.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from gem_sandbox.search.hits import Hit, SearchError

# Porter stemming over unicode61 folds case, punctuation and diacritics, so "Volcanoes!"
# finds "volcano".
_SCHEMA = """
CREATE VIRTUAL TABLE docs USING fts5(
    doc_id UNINDEXED, title, text,
    tokenize = 'porter unicode61 remove_diacritics 2'
)
"""
_INSERT = "INSERT INTO docs (doc_id, title, text) VALUES (?, ?, ?)"
_SEARCH = "SELECT doc_id, title, text, bm25(docs) AS rank FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?"

_WORD = re.compile(r"\w+")
MAX_QUERY_TERMS = 64  # each OR'd term costs a posting-list scan; a pasted essay should not stall


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression ORing the words of ``text``, each quoted so that nothing the
    user wrote (AND, NEAR, ``col:``, quotes, parentheses, ``*``) is read as query syntax.
    None when ``text`` has no words."""
    words = dict.fromkeys(word.lower() for word in _WORD.findall(text))
    return " OR ".join(f'"{word}"' for word in list(words)[:MAX_QUERY_TERMS]) or None


def _corpus_rows(corpus: Path) -> Iterator[tuple[str, str, str]]:
    """(id, title, text) per corpus line, read lazily so a large corpus never sits in memory."""
    with corpus.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                contents = row["contents"]
                if not isinstance(contents, str):
                    raise TypeError("contents is not a string")
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{corpus}:{number}: not a corpus row ({exc})") from None
            hit = Hit.from_contents(contents, str(row.get("id", number)))
            yield hit.id, hit.title, hit.text


def build_index(corpus: str | os.PathLike[str], db: str | os.PathLike[str]) -> int:
    """Index ``corpus`` into a new database at ``db`` and return the number of documents.

    The index is built in a side file and renamed over ``db``, so a rebuild replaces the old
    index whole and a server reading ``db`` never sees a half-built one."""
    corpus, db = Path(corpus), Path(db)
    building = db.with_name(db.name + ".building")
    building.unlink(missing_ok=True)
    conn = sqlite3.connect(building)
    try:
        conn.execute("PRAGMA journal_mode = OFF")  # a failed build is discarded, not rolled back
        conn.execute(_SCHEMA)
        with conn:
            conn.executemany(_INSERT, _corpus_rows(corpus))
        conn.execute("INSERT INTO docs (docs) VALUES ('optimize')")  # one b-tree: faster queries
        (count,) = conn.execute("SELECT count(*) FROM docs").fetchone()
        conn.close()
        os.replace(building, db)
    except BaseException:
        conn.close()
        building.unlink(missing_ok=True)
        raise
    return count


class SearchIndex:
    """A read-only handle on a built index, shared by threads: queries run in worker threads
    (off the event loop), and a SQLite connection must not serve two threads at once, so each
    thread opens its own."""

    def __init__(self, db: str | os.PathLike[str]) -> None:
        self.path = Path(db)
        if not self.path.is_file():
            raise FileNotFoundError(f"no search index at {self.path}; build one with `gem-sandbox search index`")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        try:
            self._connection().execute("SELECT doc_id, title, text FROM docs LIMIT 0")
        except sqlite3.Error as exc:
            self.close()
            raise ValueError(f"{self.path} is not a search index: {exc}") from None

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False)  # close() may come from any thread
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def search(self, query: str, topk: int) -> list[Hit]:
        """The ``topk`` best passages for ``query`` by BM25, best first (higher score is better)."""
        match = fts_query(query)
        if match is None or topk < 1:
            return []
        try:
            rows = self._connection().execute(_SEARCH, (match, topk)).fetchall()
        except sqlite3.Error as exc:
            raise SearchError(f"index {self.path}: {exc}") from exc
        # FTS5's bm25() is negated so that ORDER BY ranks best first; report it the usual way.
        return [Hit(doc_id, title, text, -rank) for doc_id, title, text, rank in rows]

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
            self._local = threading.local()

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
