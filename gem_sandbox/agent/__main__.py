"""``python3 -m gem_agent``: parse the options and serve the protocol until told to stop."""

import asyncio
import logging
import os
import signal
import sys

from .config import parse_args
from .server import serve


def main(argv=None):
    config = parse_args(argv)
    if config.log_fd is not None:
        os.dup2(config.log_fd, 2)
        os.close(config.log_fd)
    logging.basicConfig(
        stream=sys.stderr,
        level=config.log_level.upper(),
        format="gem-agent %(levelname)s %(message)s",
    )
    try:
        asyncio.run(serve(config))
    finally:
        if config.stop_init:
            os.kill(1, signal.SIGTERM)


if __name__ == "__main__":
    main()
