"""Idempotency keys: a retried request gets the first one's answer instead of running again.

The first request with a key runs; one with the same token and key while it runs waits for
it; one after gets its answer, for ``ttl`` seconds. A key reused with a different request
(method, path or body) is refused with 422, since its answer would be for something else.
Answers that say nothing was done (429, 503, 408) are not kept, so a retry does it.
Kept answers are bounded in bytes; past the bound the oldest go first.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from gem_sandbox.service.errors import Problem

KEY_HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
NOT_DONE = frozenset({408, 429, 503})  # answers to requests that were not carried out


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(eq=False)
class _Running:
    fingerprint: bytes
    done: anyio.Event = field(default_factory=anyio.Event)


@dataclass(frozen=True, slots=True)
class _Kept:
    fingerprint: bytes
    answer: Answer
    until: float


class Replays:
    def __init__(self, ttl: float, max_bytes: int) -> None:
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.replayed = 0  # answers served from the cache, for the metrics
        self._running: dict[tuple[str, str], _Running] = {}
        self._kept: OrderedDict[tuple[str, str], _Kept] = OrderedDict()  # oldest first
        self._bytes = 0

    async def once(
        self, tenant: str, key: str, request: tuple[str, str, bytes], produce: Callable[[], Awaitable[Answer]]
    ) -> Answer:
        """``produce()``'s answer, computed once per ``(tenant, key)`` while it is kept."""
        if not key or len(key) > MAX_KEY_LENGTH:
            raise Problem(400, "bad_request", f"an {KEY_HEADER} is 1 to {MAX_KEY_LENGTH} characters")
        self._forget_old()
        method, path, body = request
        fingerprint = hashlib.sha256(f"{method} {path}\n".encode() + body).digest()
        slot = (tenant, key)
        while True:
            found = self._kept.get(slot) or self._running.get(slot)
            if found is None:
                break
            if found.fingerprint != fingerprint:
                raise Problem(
                    422, "idempotency_conflict", f"{KEY_HEADER} {key!r} was used for a different request; use a new key"
                )
            if isinstance(found, _Kept):
                self.replayed += 1
                return found.answer
            await found.done.wait()  # then kept, or not carried out: look again
        running = self._running[slot] = _Running(fingerprint)
        try:
            answer = await produce()
            if answer.status not in NOT_DONE:
                self._kept[slot] = _Kept(fingerprint, answer, time.monotonic() + self.ttl)
                self._bytes += len(answer.body)
            return answer
        finally:
            del self._running[slot]
            running.done.set()

    def _forget_old(self) -> None:
        now = time.monotonic()
        while self._kept:
            slot, kept = next(iter(self._kept.items()))
            if kept.until > now and self._bytes <= self.max_bytes:
                return
            del self._kept[slot]
            self._bytes -= len(kept.answer.body)
