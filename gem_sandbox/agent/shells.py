"""Shell sessions: one persistent ``bash`` per session name.

bash runs a small driver loop: read a sequence number and a command from fd 4 (each
NUL-terminated), ``eval`` the command in the shell itself (so ``cd`` and ``export`` persist),
write the number and ``$?`` to fd 3. The driver calls builtins as ``builtin``, so a command
that defines functions named ``read`` or ``printf`` does not change how it reports. Commands get
``/dev/null`` as stdin so they cannot eat the next command. A timeout kills every process of
the session's tenant except bash itself: when the command was an external program, bash
reports its status and the session lives on; when bash itself was busy (a builtin loop) no
status comes and the session is killed, to be started afresh by the next command.
"""

from .protocol import text_bytes
from .sessions import Sessions

DRIVER = (
    'while IFS= builtin read -r -d "" __gem_seq <&4'
    ' && IFS= builtin read -r -d "" __gem_command <&4; do'
    ' builtin eval "$__gem_command"; builtin printf "%s %d\\n" "$__gem_seq" "$?" >&3;'
    " done"
)


class Shells(Sessions):
    def __init__(self, loop, config, forker, tenants, workspace, oom, bash):
        Sessions.__init__(self, loop, config, forker, tenants, workspace, oom)
        self.bash = bash

    def orders(self):
        return {"program": "exec", "argv": [self.bash, "--noprofile", "--norc", "-c", DRIVER]}

    def encode(self, seq, text, header):
        return b"%d\0%s\0" % (seq, text_bytes(text))

    def unsendable(self, text):
        if "\0" in text:
            return "bash: the command contains a NUL byte, which bash cannot read"
        return None

    async def interrupt(self, session):
        await self.tenants.kill(session.tenant, spare=[session.pid])
