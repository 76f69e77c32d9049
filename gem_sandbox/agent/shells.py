"""Shell sessions: one persistent ``bash`` per session name.

bash runs a small driver loop: read a NUL-terminated command from fd 4, ``eval`` it in the
shell itself (so ``cd`` and ``export`` persist), write ``$?`` to fd 3. Commands get
``/dev/null`` as stdin so they cannot eat the next command. A timeout kills every process of
the session's tenant except bash itself: when the command was an external program, bash
reports its status and the session lives on; when bash itself was busy (a builtin loop) no
status comes and the session is killed, to be started afresh by the next command.
"""

from .sessions import Sessions

DRIVER = (
    'while IFS= read -r -d "" __gem_command <&4; do'
    ' eval "$__gem_command"; printf "%d\\n" "$?" >&3;'
    " done"
)


class Shells(Sessions):
    def __init__(self, loop, config, reaper, tenants, workspace, bash):
        Sessions.__init__(self, loop, config, reaper, tenants, workspace)
        self.bash = bash

    def orders(self):
        return {"program": "exec", "argv": [self.bash, "--noprofile", "--norc", "-c", DRIVER]}

    async def interrupt(self, session):
        await self.tenants.kill(session.tenant, spare=[session.pid])
