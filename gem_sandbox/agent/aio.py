"""The agent's event loop: the part of asyncio it uses, on ``epoll``.

Why not asyncio: it is most of an idle sandbox's memory. Importing it costs the agent about
4 MB of private heap (every sandbox holds its own) and 15 ms of every sandbox's start, for
transports, protocols, streams, subprocesses and SSL that the agent never uses: it reads and
writes raw pipes and forks its own children. This module keeps asyncio's names and meaning
for what the agent does use (futures, tasks, ``wait``, ``sleep``, events, locks, readers,
writers and signal handlers), so the agent reads as asyncio code, in about a tenth of its size.

One loop per process, on the main thread; callbacks run in the order they became ready.
"""

import collections
import heapq
import os
import select
import signal
import time

from . import log

FIRST_COMPLETED = "FIRST_COMPLETED"
ALL_COMPLETED = "ALL_COMPLETED"
_READ = select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR
_WRITE = select.EPOLLOUT | select.EPOLLHUP | select.EPOLLERR

_running = None


class CancelledError(BaseException):
    """The task was cancelled (a BaseException, as asyncio's, so ``except Exception`` lets
    it through)."""


class Future:
    """A result that is not there yet; ``await`` it from a task."""

    def __init__(self, loop):
        self._loop = loop
        self._callbacks = []
        self._state = "pending"
        self._result = self._exception = None
        self._retrieved = False

    def done(self):
        return self._state != "pending"

    def cancelled(self):
        return self._state == "cancelled"

    def result(self):
        self._retrieved = True
        if self._state == "cancelled":
            raise CancelledError()
        if self._state == "pending":
            raise RuntimeError("the result is not set yet")
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self):
        self._retrieved = True
        if self._state == "cancelled":
            raise CancelledError()
        return self._exception

    def add_done_callback(self, callback):
        if self.done():
            self._loop.call_soon(callback, self)
        else:
            self._callbacks.append(callback)

    def remove_done_callback(self, callback):
        while callback in self._callbacks:
            self._callbacks.remove(callback)

    def set_result(self, result):
        self._finish("finished", result, None)

    def set_exception(self, exception):
        self._finish("finished", None, exception)

    def cancel(self):
        if self.done():
            return False
        self._finish("cancelled", None, None)
        return True

    def _finish(self, state, result, exception):
        if self.done():
            raise RuntimeError("the future is already done")
        self._state, self._result, self._exception = state, result, exception
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._loop.call_soon(callback, self)

    def __await__(self):
        if not self.done():
            yield self
        return self.result()

    __iter__ = __await__


class Task(Future):
    """Drives a coroutine: each future it awaits resumes it when done. ``cancel`` raises
    :class:`CancelledError` where it waits."""

    def __init__(self, loop, coro):
        Future.__init__(self, loop)
        self._coro = coro
        self._waiting = None
        self._must_cancel = False
        loop.call_soon(self._step)

    def cancel(self):
        if self.done():
            return False
        self._must_cancel = True
        if self._waiting is not None:
            self._waiting.cancel()  # resumes the task, whose await then raises
        return True

    def __del__(self):
        if self._exception is not None and not self._retrieved:  # as asyncio says it
            log.error("a task's exception was never retrieved: %r", self._exception)

    def _step(self, _=None):
        self._waiting = None
        if self.done():
            return
        try:
            if self._must_cancel:
                self._must_cancel = False
                awaited = self._coro.throw(CancelledError())
            else:
                awaited = self._coro.send(None)
        except StopIteration as stop:
            self._finish("finished", stop.value, None)
        except CancelledError:
            self._finish("cancelled", None, None)
        except (KeyboardInterrupt, SystemExit) as exc:
            self._finish("finished", None, exc)
            raise
        except BaseException as exc:
            self._finish("finished", None, exc)
        else:
            if isinstance(awaited, Future):
                self._waiting = awaited
                awaited.add_done_callback(self._step)
            else:  # a bare yield: run again on the next pass
                self._loop.call_soon(self._step)


class _Timer:
    __slots__ = ("when", "callback", "args", "cancelled")

    def __init__(self, when, callback, args):
        self.when, self.callback, self.args, self.cancelled = when, callback, args, False

    def __lt__(self, other):
        return self.when < other.when

    def cancel(self):
        self.cancelled = True


class Loop:
    """Ready callbacks, timers, and file descriptors watched with ``epoll``."""

    def __init__(self):
        self._ready = collections.deque()
        self._timers = []
        self._epoll = select.epoll()
        self._fds = {}  # fd -> [reader, writer]
        self._signals = {}  # signal number -> handler
        self._wakeup = None  # (read end, write end) of the signals' wakeup pipe

    time = staticmethod(time.monotonic)

    def call_soon(self, callback, *args):
        self._ready.append((callback, args))

    def call_later(self, delay, callback, *args):
        timer = _Timer(self.time() + delay, callback, args)
        heapq.heappush(self._timers, timer)
        return timer

    def create_future(self):
        return Future(self)

    def create_task(self, coro):
        return Task(self, coro)

    # --- file descriptors

    def add_reader(self, fd, callback):
        self._watch(fd, 0, callback)

    def add_writer(self, fd, callback):
        self._watch(fd, 1, callback)

    def remove_reader(self, fd):
        self._watch(fd, 0, None)

    def remove_writer(self, fd):
        self._watch(fd, 1, None)

    def _watch(self, fd, which, callback):
        old = self._fds.get(fd)
        if old is None and callback is None:
            return
        new = list(old or (None, None))
        new[which] = callback
        mask = (_READ if new[0] else 0) | (select.EPOLLOUT if new[1] else 0)
        if not mask:
            del self._fds[fd]
            self._epoll.unregister(fd)
            return
        self._fds[fd] = new
        if old is None:
            self._epoll.register(fd, mask)
        else:
            self._epoll.modify(fd, mask)

    # --- signals

    def add_signal_handler(self, signum, callback):
        """Call ``callback`` on the loop (not in the signal's interruption) for ``signum``."""
        if self._wakeup is None:
            self._wakeup = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            signal.set_wakeup_fd(self._wakeup[1], warn_on_full_buffer=False)
            self.add_reader(self._wakeup[0], self._signalled)
        self._signals[signum] = callback
        signal.signal(signum, _ignore)
        signal.siginterrupt(signum, False)

    def remove_signal_handler(self, signum):
        if self._signals.pop(signum, None) is not None:
            signal.signal(signum, signal.SIG_DFL)

    def _signalled(self):
        try:
            data = os.read(self._wakeup[0], 4096)
        except BlockingIOError:
            return
        for signum in dict.fromkeys(data):  # once per batch: each handler reads all there is
            handler = self._signals.get(signum)
            if handler is not None:
                handler()

    # --- running

    def run_until_complete(self, coro):
        global _running
        task = self.create_task(coro)
        _running = self
        try:
            while not task.done():
                self._run_once()
        finally:
            _running = None
        return task.result()

    def _run_once(self):
        timers = self._timers
        while timers and timers[0].cancelled:
            heapq.heappop(timers)
        if self._ready:
            timeout = 0
        elif timers:
            timeout = max(0.0, timers[0].when - self.time())
        else:
            timeout = -1
        try:
            events = self._epoll.poll(timeout)
        except InterruptedError:
            events = ()
        for fd, mask in events:
            for which, bits in ((0, _READ), (1, _WRITE)):
                watched = self._fds.get(fd)  # an earlier callback may have removed it
                if watched is not None and watched[which] is not None and mask & bits:
                    self._call(watched[which], ())
        now = self.time()
        while timers and timers[0].when <= now:
            timer = heapq.heappop(timers)
            if not timer.cancelled:
                self._ready.append((timer.callback, timer.args))
        for _ in range(len(self._ready)):  # what these schedule runs on the next pass
            callback, args = self._ready.popleft()
            self._call(callback, args)

    def _call(self, callback, args):
        try:
            callback(*args)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:
            log.exception("a callback of the event loop failed")

    def close(self):
        for signum in list(self._signals):
            self.remove_signal_handler(signum)
        if self._wakeup is not None:
            signal.set_wakeup_fd(-1)
            self.remove_reader(self._wakeup[0])
            for fd in self._wakeup:
                os.close(fd)
            self._wakeup = None
        self._epoll.close()


def _ignore(signum, frame):
    """The Python-level handler: the wakeup pipe carries the signal to the loop."""


def run(coro):
    """Run ``coro`` on a new loop until it returns; the loop is closed after."""
    loop = Loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def get_running_loop():
    if _running is None:
        raise RuntimeError("no running event loop")
    return _running


async def sleep(delay):
    loop = get_running_loop()
    future = loop.create_future()
    timer = loop.call_later(delay, _resolve, future)
    try:
        await future
    finally:
        timer.cancel()


def _resolve(future, result=None):
    if not future.done():
        future.set_result(result)


async def wait(futures, timeout=None, return_when=ALL_COMPLETED):
    """``(done, pending)`` once the first (``FIRST_COMPLETED``) or every future is done, or
    ``timeout`` seconds have passed."""
    futures = set(futures)
    loop = get_running_loop()
    pending = set(f for f in futures if not f.done())
    if pending and not (return_when == FIRST_COMPLETED and len(pending) < len(futures)):
        waiter = loop.create_future()

        def on_done(future):
            pending.discard(future)
            if not pending or return_when == FIRST_COMPLETED:
                _resolve(waiter)

        timer = None if timeout is None else loop.call_later(timeout, _resolve, waiter)
        for future in pending:
            future.add_done_callback(on_done)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            for future in futures:
                future.remove_done_callback(on_done)
    done = set(f for f in futures if f.done())
    return done, futures - done


class Event:
    def __init__(self):
        self._set = False
        self._waiters = []

    def is_set(self):
        return self._set

    def clear(self):
        self._set = False

    def set(self):
        self._set = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _resolve(waiter)

    async def wait(self):
        if not self._set:
            waiter = get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        return True


class Lock:
    """First come, first served."""

    def __init__(self):
        self._locked = False
        self._waiters = collections.deque()

    def locked(self):
        return self._locked

    async def acquire(self):
        if self._locked or self._waiters:
            waiter = get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_next()  # it was handed the lock: pass it on
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self._locked = True

    def release(self):
        self._locked = False
        self._wake_next()

    def _wake_next(self):
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
                return

    async def __aenter__(self):
        await self.acquire()

    async def __aexit__(self, *exc):
        self.release()
