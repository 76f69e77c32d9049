"""Non-blocking pipe I/O on the agent's event loop, and the capped capture of output.

The agent forks its children itself (a Python run must fork from the warm interpreter), so
subprocess transports would not fit even on asyncio; these small classes do the job on raw
file descriptors with ``loop.add_reader``/``add_writer`` (:mod:`.aio`).
"""

import os

CHUNK = 64 * 1024


class Capture:
    """Bytes written to one stream: the first and last ``cap // 2`` bytes and the total count.

    Whatever a program prints, the agent holds at most ``cap`` bytes of it.
    """

    def __init__(self, cap):
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data[-self.tail_cap :] if self.tail_cap else b""
            excess = len(self.tail) - self.tail_cap
            if excess > 0:
                del self.tail[:excess]

    @property
    def truncated(self):
        return self.total > len(self.head) + len(self.tail)

    def value(self):
        """Head and tail, with a marker saying how many bytes between them were dropped."""
        if not self.truncated:
            return bytes(self.head + self.tail)
        dropped = self.total - len(self.head) - len(self.tail)
        marker = ("\n[... %d bytes truncated ...]\n" % dropped).encode()
        return bytes(self.head) + marker + bytes(self.tail)


class Count(Capture):
    """A stream's byte count alone, for output sent on as it comes (nothing is held, so
    nothing is cut)."""

    def __init__(self):
        Capture.__init__(self, 0)

    def add(self, data):
        self.total += len(data)

    @property
    def truncated(self):
        return False


class PipeReader:
    """Reads a pipe whenever it is readable and hands each chunk to ``on_data``.

    ``eof`` resolves when the last writer closed its end (or the reader was closed).
    """

    def __init__(self, loop, fd, on_data):
        self.loop = loop
        self.fd = fd
        self.on_data = on_data
        self.eof = loop.create_future()
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._read_once)

    @property
    def closed(self):
        return self.eof.done()

    def _read_once(self):
        """Read one chunk; False when nothing more is available right now."""
        try:
            data = os.read(self.fd, CHUNK)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            data = b""
        if not data:
            self.close()
            return False
        self.on_data(data)
        return True

    def drain(self, limit):
        """Read what is already in the pipe, now, up to about ``limit`` bytes (the writer
        said it is done; a background job that keeps writing must not hold us here)."""
        while limit > 0 and not self.closed and self._read_once():
            limit -= CHUNK

    def close(self):
        if not self.closed:
            self.loop.remove_reader(self.fd)
            os.close(self.fd)
            self.eof.set_result(None)


class PipeWriter:
    """Writes to a pipe without blocking the loop; a reader gone away (EPIPE) drops the rest."""

    def __init__(self, loop, fd, close_when_done=False):
        self.loop = loop
        self.fd = fd
        self.close_when_done = close_when_done
        self.buffer = bytearray()
        self.closed = False
        os.set_blocking(fd, False)

    def write(self, data):
        if self.closed:
            return
        waiting = bool(self.buffer)
        self.buffer += data
        if not waiting:
            self._writable()
            if self.buffer and not self.closed:
                self.loop.add_writer(self.fd, self._writable)

    def _writable(self):
        try:
            while self.buffer:
                del self.buffer[: os.write(self.fd, self.buffer)]
        except (BlockingIOError, InterruptedError):
            return  # the loop calls again when the pipe has room
        except OSError:
            self.buffer.clear()  # the reader is gone
        self.loop.remove_writer(self.fd)
        if self.close_when_done:
            self.close()

    def finish(self):
        """Close once what is buffered has been written (the reader then sees end of file)."""
        self.close_when_done = True
        if not self.buffer:
            self.close()

    def close(self):
        if not self.closed:
            self.closed = True
            self.buffer.clear()
            self.loop.remove_writer(self.fd)
            os.close(self.fd)
