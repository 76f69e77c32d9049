"""What every retrieval backend returns, so the tool formats passages one way."""

from __future__ import annotations

from dataclasses import dataclass


class SearchError(Exception):
    """A search that could not be answered (backend down, slow, or answering nonsense)."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved passage. Search-R1 corpora keep a passage as ``contents`` with the title
    on the first line; ``title`` and ``text`` are that split, as GEM formats passages."""

    id: str
    title: str
    text: str
    score: float | None = None

    @classmethod
    def from_contents(cls, contents: str, id: str = "", score: float | None = None) -> Hit:
        title, _, text = contents.partition("\n")
        return cls(id, title, text, score)

    @property
    def contents(self) -> str:
        return f"{self.title}\n{self.text}"

    def document(self) -> dict[str, str]:
        """The passage as a Search-R1 server returns it."""
        return {"id": self.id, "title": self.title, "text": self.text, "contents": self.contents}
