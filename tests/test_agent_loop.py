"""The agent's event loop (gem_sandbox/agent/aio.py) keeps asyncio's meaning for what the
agent uses: these pin the parts whose subtleties the agent relies on."""

import gc
import os
import signal

import pytest

from gem_sandbox.agent import aio


def test_a_task_returns_its_coroutines_value_and_raises_its_error():
    async def value():
        await aio.sleep(0)
        return 42

    async def error():
        raise ValueError("no")

    async def main():
        loop = aio.get_running_loop()
        good, bad = loop.create_task(value()), loop.create_task(error())
        done, pending = await aio.wait([good, bad])
        assert done == {good, bad} and not pending
        assert good.result() == 42
        assert isinstance(bad.exception(), ValueError)
        return "ran"

    assert aio.run(main()) == "ran"


def test_cancelling_a_task_raises_where_it_waits_and_its_finally_runs():
    cleaned = []

    async def sleeper():
        try:
            await aio.sleep(60)
        finally:
            cleaned.append(True)

    async def main():
        loop = aio.get_running_loop()
        task = loop.create_task(sleeper())
        await aio.sleep(0.01)
        assert task.cancel()
        await aio.wait([task])
        assert task.cancelled() and cleaned == [True]
        with pytest.raises(aio.CancelledError):
            task.result()

    aio.run(main())


def test_wait_first_completed_and_timeout():
    async def main():
        loop = aio.get_running_loop()
        quick, slow = loop.create_future(), loop.create_future()
        loop.call_later(0.01, quick.set_result, 1)
        started = loop.time()
        done, pending = await aio.wait([quick, slow], return_when=aio.FIRST_COMPLETED)
        assert done == {quick} and pending == {slow}
        done, pending = await aio.wait([slow], timeout=0.05)
        assert not done and pending == {slow}
        assert 0.05 <= loop.time() - started < 5
        assert not slow._callbacks  # wait took its callbacks back

    aio.run(main())


def test_a_lock_handed_to_a_cancelled_waiter_passes_to_the_next():
    order = []

    async def holder(lock, name):
        async with lock:
            order.append(name)
            await aio.sleep(0.01)

    async def main():
        loop = aio.get_running_loop()
        lock = aio.Lock()
        await lock.acquire()
        second = loop.create_task(holder(lock, "second"))
        third = loop.create_task(holder(lock, "third"))
        await aio.sleep(0)  # both wait
        lock.release()  # handed to second, which has not resumed yet
        second.cancel()
        await aio.wait([second, third], timeout=5)
        assert second.cancelled() and third.done() and not lock.locked()

    aio.run(main())
    assert order == ["third"]


def test_readers_writers_and_signal_handlers_run_on_the_loop():
    async def main():
        loop = aio.get_running_loop()
        r, w = os.pipe()
        got, heard = loop.create_future(), loop.create_future()

        def readable():
            loop.remove_reader(r)
            got.set_result(os.read(r, 10))

        loop.add_reader(r, readable)
        loop.add_writer(w, lambda: (loop.remove_writer(w), os.write(w, b"hello")))
        loop.add_signal_handler(signal.SIGUSR1, lambda: heard.set_result(True))
        os.kill(os.getpid(), signal.SIGUSR1)
        done, _ = await aio.wait([got, heard], timeout=5)
        assert got.result() == b"hello" and heard.result() is True
        os.close(r)
        os.close(w)

    aio.run(main())
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL  # the loop put it back


def test_an_event_wakes_every_waiter():
    async def main():
        loop = aio.get_running_loop()
        event = aio.Event()
        waiters = [loop.create_task(event.wait()) for _ in range(3)]
        await aio.sleep(0)
        assert not any(w.done() for w in waiters)
        event.set()
        done, _ = await aio.wait(waiters, timeout=5)
        assert len(done) == 3 and event.is_set()

    aio.run(main())


def test_a_task_error_nobody_retrieved_is_logged(capsys):
    async def error():
        raise ValueError("lost")

    async def main():
        task = aio.get_running_loop().create_task(error())
        await aio.sleep(0.01)
        assert task.done()

    aio.run(main())
    gc.collect()
    assert "never retrieved: ValueError('lost')" in capsys.readouterr().err
