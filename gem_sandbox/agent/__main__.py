"""``python3 -m gem_agent``: parse the options and serve the protocol until told to stop."""

import gc
import os


def main(argv=None):
    zygote = None
    if os.geteuid() == 0:
        # Forked first, before the agent imports anything else (even its options parser):
        # runs fork from this small process, not from the agent's heap (see zygote.py).
        # Except what both a kernel and the agent import (ast for cells, json): imported
        # here, its pages are shared by the agent, the zygote and the kernel instead of
        # copied into each. A stateful sandbox is 1.3 MB smaller; an idle one 0.5 MB larger
        # (the agent's own later allocations copy some of those pages); a warm run no slower.
        # And typing, which most scored code imports first (`from typing import List`): such
        # a run takes 4 ms instead of 13, for 0.35 MB more per sandbox.
        import ast  # noqa: F401
        import json  # noqa: F401
        import typing  # noqa: F401

        from . import zygote as fork_server

        # Frozen, so that no collection in the agent or the zygote writes to the headers of
        # these shared objects and copies their pages (0.4 MB less per sandbox).
        gc.freeze()
        zygote = fork_server.start()
    from .config import parse_args

    config = parse_args(argv)
    if zygote is not None and not config.uid_mode:
        zygote.close()  # token mode forks from the agent; the zygote exits at its EOF
        zygote = None
    from . import aio, log
    from .server import serve

    if config.log_fd is not None:
        os.dup2(config.log_fd, 2)
        os.close(config.log_fd)
    log.configure(config.log_level)
    aio.run(serve(config, zygote))


if __name__ == "__main__":
    main()
