"""Nothing one tenant leaves behind reaches the next tenant of the same sandbox (the pool's
reset removes it) or a tenant of the sandbox next door (while it is still there).

Every case plants state; the harness's next-tenant probe then checks the usual places, and a
case's ``next_tenant`` code looks for its particular trace (exiting non-zero if found).
"""

from __future__ import annotations

import pytest

from tests.security.harness import S, case

pytestmark = pytest.mark.anyio

LIBC = """
import ctypes, errno, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
try:
    libc.mq_open
    rt = libc
except AttributeError:
    rt = ctypes.CDLL('librt.so.1', use_errno=True)
KEY = 0x5ec00000 + @PORT@
IPC_CREAT = 0o1000
def fail(what):
    sys.exit('%s: %s' % (what, os.strerror(ctypes.get_errno())))
"""

FILES = [
    case(
        "files_in_every_writable_dir",
        "python",
        """
        import os
        for d in ('/work', '/tmp', '/var/tmp', '/dev/shm', os.environ['HOME']):
            try:
                open(os.path.join(d, '.gem-sec-left'), 'w').write('secret')
                os.makedirs(os.path.join(d, 'gem-sec-dir/deeper'), exist_ok=True)
            except OSError:
                pass
        """,
        S.OK,
        neighbour="""
import os
for d in ('/work', '/tmp', '/dev/shm'):
    assert not os.path.exists(os.path.join(d, '.gem-sec-left')), 'saw the other sandbox file in ' + d
print('benign', 42)
""",
        neighbour_delay=0.3,
    ),
    case(
        "files_the_next_tenant_cannot_open",
        "bash",
        "mkdir -p locked/inner && touch locked/inner/f && chmod 000 locked/inner locked\n"
        "touch /tmp/unreadable && chmod 000 /tmp/unreadable\nmkdir /tmp/sticky && chmod 1700 /tmp/sticky",
        S.OK,
    ),
    case(
        "odd_names_and_a_symlink_loop",
        "python",
        """
        import os
        for name in (b'new\\nline', b'\\xff\\xfe-not-utf8', b'-rf', b' ', b'\\x1b[31mred'):
            open(name, 'w').close()
        os.symlink('loop', 'loop')
        os.symlink('/', 'root-link')
        os.symlink('/etc/passwd', '/tmp/passwd-link')
        """,
        S.OK,
    ),
    case(
        "a_very_deep_directory_tree",
        "python",
        """
        import os
        fd = os.open('/work', os.O_RDONLY)
        for _ in range(2000):
            os.mkdir('d', dir_fd=fd)
            nxt = os.open('d', os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        open('leaf', 'w', opener=lambda p, f: os.open(p, f, dir_fd=fd)).write('x')
        """,
        S.OK,
        timeout=3.0,
    ),
    case(
        "a_posix_message_queue_file",
        "python",
        LIBC
        + """
mqd = rt.mq_open(b'/gem-sec-@PORT@', os.O_CREAT | os.O_RDWR, 0o666, None)
if mqd < 0:
    fail('mq_open')
if rt.mq_send(mqd, b'secret', 6, 0) != 0:
    fail('mq_send')
""",
        S.OK,
        next_tenant=LIBC
        + """
mqd = rt.mq_open(b'/gem-sec-@PORT@', os.O_RDWR)
if mqd >= 0 or ctypes.get_errno() != errno.ENOENT:
    sys.exit('the message queue survived the reset (mq_open -> %d, errno %d)' % (mqd, ctypes.get_errno()))
""",
    ),
]


@pytest.mark.parametrize("case", FILES)
async def test_files_left_anywhere_are_gone_for_the_next_tenant(harness, case):
    await harness.verify(case)


def _sysv_gone(call: str, name: str) -> str:
    return LIBC + f"""
r = libc.{call}
if r != -1 or ctypes.get_errno() != errno.ENOENT:
    sys.exit('the System V {name} survived (-> %d, errno %d)' % (r, ctypes.get_errno()))
"""


def _sysv_neighbour(call: str, name: str) -> str:
    return LIBC + f"""
r = libc.{call}
if r != -1 or ctypes.get_errno() != errno.ENOENT:
    sys.exit('the other sandbox System V {name} is visible here')
print('benign', 42)
"""


IPC = [
    case(
        "sysv_shared_memory_segment",
        "python",
        LIBC
        + """
shmid = libc.shmget(KEY, 32 * 2 ** 20, IPC_CREAT | 0o666)
if shmid < 0:
    fail('shmget')
libc.shmat.restype = ctypes.c_void_p
addr = libc.shmat(shmid, None, 0)
ctypes.memset(addr, 0x41, 32 * 2 ** 20)
time.sleep(0.6)
""",
        S.OK,
        next_tenant=_sysv_gone("shmget(KEY, 0, 0)", "shared memory"),
        neighbour=_sysv_neighbour("shmget(KEY, 0, 0)", "shared memory"),
        neighbour_delay=0.3,
    ),
    case(
        "sysv_message_queue",
        "python",
        LIBC
        + """
msqid = libc.msgget(KEY, IPC_CREAT | 0o666)
if msqid < 0:
    fail('msgget')
class Msg(ctypes.Structure):
    _fields_ = [('mtype', ctypes.c_long), ('text', ctypes.c_char * 16)]
if libc.msgsnd(msqid, ctypes.byref(Msg(1, b'secret')), 16, 0) != 0:
    fail('msgsnd')
time.sleep(0.6)
""",
        S.OK,
        next_tenant=_sysv_gone("msgget(KEY, 0)", "message queue"),
        neighbour=_sysv_neighbour("msgget(KEY, 0)", "message queue"),
        neighbour_delay=0.3,
    ),
    case(
        "sysv_semaphore_set",
        "python",
        LIBC
        + """
semid = libc.semget(KEY, 4, IPC_CREAT | 0o666)
if semid < 0:
    fail('semget')
time.sleep(0.6)
""",
        S.OK,
        next_tenant=_sysv_gone("semget(KEY, 0, 0)", "semaphore set"),
        neighbour=_sysv_neighbour("semget(KEY, 0, 0)", "semaphore set"),
        neighbour_delay=0.3,
    ),
]


@pytest.mark.parametrize("case", IPC)
async def test_system_v_ipc_objects_do_not_survive_or_cross(harness, case):
    await harness.verify(case)


KEYCTL = """
SYS_add_key, SYS_keyctl = 248, 250  # x86_64
L = ctypes.c_long
def add_key(kind, description, payload, ring):
    return libc.syscall(L(SYS_add_key), kind, description, payload, L(len(payload) if payload else 0), L(ring))
"""


def _plant_key(ring: int, kind: bytes = b"user") -> str:
    payload = "b'gem-sec-secret'" if kind == b"user" else "None"
    return (
        LIBC
        + KEYCTL
        + f"""
serial = add_key({kind!r}, b'gem-sec-key', {payload}, {ring})
if serial < 0:
    print('blocked', ctypes.get_errno())
    sys.exit(0)
libc.syscall(L(SYS_keyctl), L(5), L(serial), L(0x3f3f3f3f))  # KEYCTL_SETPERM: all for everyone
print(serial)
"""
    )


KEY_GONE = (
    LIBC
    + KEYCTL
    + """
out = '@PAYLOAD_OUT@'
if out.startswith('blocked'):
    sys.exit(0)
buf = ctypes.create_string_buffer(64)
n = libc.syscall(L(SYS_keyctl), L(11), L(int(out)), buf, L(64))  # KEYCTL_READ
if n >= 0:
    sys.exit('read the previous tenant key %s: %r' % (out, buf.raw[:n]))
for ring in (-4, -3, -5):  # @u, @s, @us
    found = libc.syscall(L(SYS_keyctl), L(10), L(ring), b'user', b'gem-sec-key', L(0))  # KEYCTL_SEARCH
    if found >= 0:
        sys.exit('found the previous tenant key in keyring %d' % ring)
"""
)

KEYRINGS = [
    case("user_key_in_the_user_keyring", "python", _plant_key(-4), S.OK, next_tenant=KEY_GONE),
    case("user_key_in_the_session_keyring", "python", _plant_key(-3), S.OK, next_tenant=KEY_GONE),
    case("named_keyring_in_the_user_keyring", "python", _plant_key(-4, b"keyring"), S.OK, next_tenant=KEY_GONE),
]


@pytest.mark.parametrize("case", KEYRINGS)
async def test_kernel_keys_do_not_reach_the_next_tenant(harness, case):
    await harness.verify(case)


PER_UID_SKIP = {
    "rootless": "SECURITY.md (Rootless): every rootless sandbox of one host user runs as that "
    "uid, and the kernel also counts inotify instances and message-queue bytes per host uid"
}

LIMIT_FILLS = [
    case(
        "posix_mqueue_bytes_exhausted_in_one_sandbox",
        "python",
        LIBC
        + """
class Attr(ctypes.Structure):
    _fields_ = [('flags', ctypes.c_long), ('maxmsg', ctypes.c_long), ('msgsize', ctypes.c_long),
                ('curmsgs', ctypes.c_long), ('pad', ctypes.c_long * 4)]
made = 0
for i in range(64):
    if rt.mq_open(b'/gem-sec-fill-%d' % i, os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(Attr(0, 10, 8192, 0))) < 0:
        break
    made += 1
print('queues', made)
time.sleep(1.0)
""",
        S.OK,
        timeout=3.0,
        neighbour=LIBC
        + """
class Attr(ctypes.Structure):
    _fields_ = [('flags', ctypes.c_long), ('maxmsg', ctypes.c_long), ('msgsize', ctypes.c_long),
                ('curmsgs', ctypes.c_long), ('pad', ctypes.c_long * 4)]
mqd = rt.mq_open(b'/gem-sec-neighbour', os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(Attr(0, 10, 8192, 0)))
if mqd < 0:
    fail('another sandbox exhausted this one: mq_open')
rt.mq_unlink(b'/gem-sec-neighbour')
print('benign', 42)
""",
        neighbour_delay=0.4,
        skip=PER_UID_SKIP,
    ),
    case(
        "inotify_instances_exhausted_in_one_sandbox",
        "python",
        LIBC
        + """
made = 0
while made < 1024 and libc.inotify_init1(0) >= 0:
    made += 1
print('instances', made)
time.sleep(1.0)
""",
        S.OK,
        timeout=3.0,
        neighbour=LIBC
        + """
if libc.inotify_init1(0) < 0:
    fail('another sandbox exhausted this one: inotify_init1')
print('benign', 42)
""",
        neighbour_delay=0.4,
        skip=PER_UID_SKIP,
    ),
]


@pytest.mark.parametrize("case", LIMIT_FILLS)
async def test_per_uid_limits_exhausted_in_one_sandbox_are_not_felt_in_another(harness, case):
    await harness.verify(case)


STARTUP = [
    case(
        "sitecustomize_and_usercustomize_in_the_work_dir_and_tmp",
        "python",
        """
        for d in ('/work', '/tmp'):
            for name in ('sitecustomize.py', 'usercustomize.py'):
                open('%s/%s' % (d, name), 'w').write("print('PLANTED'); import os; os.environ['GEM_PLANTED'] = '1'\\n")
        """,
        S.OK,
    ),
    case(
        "pth_file_in_the_user_site",
        "python",
        """
        import os, sys
        for path in (os.path.join(os.environ['HOME'], '.local/lib/python%d.%d/site-packages' % sys.version_info[:2]),):
            os.makedirs(path, exist_ok=True)
            open(os.path.join(path, 'gem_plant.pth'), 'w').write("import os; print('PLANTED'); os.environ['GEM_PLANTED'] = '1'\\n")
        """,
        S.OK,
    ),
    case(
        "shell_startup_files_in_home",
        "bash",
        """
        for f in .bashrc .bash_profile .profile .bash_login .bash_logout .inputrc; do
            printf 'echo PLANTED\\nexport GEM_PLANTED=1\\nalias ls="echo PLANTED"\\n' > "$HOME/$f"
        done
        printf 'echo PLANTED\\n' > /tmp/bash_env
        """,
        S.OK,
    ),
    case(
        "bash_env_exported_in_the_shell_session",
        "shell",
        "printf 'echo PLANTED\\n' > /tmp/bash_env; export BASH_ENV=/tmp/bash_env ENV=/tmp/bash_env PROMPT_COMMAND='echo PLANTED'",
        S.OK,
    ),
]


@pytest.mark.parametrize("case", STARTUP)
async def test_planted_startup_files_have_no_effect_on_the_next_tenant(harness, case):
    await harness.verify(case)


LISTENER = """
import os, socket, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        tcp = socket.socket()
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(('127.0.0.1', @PORT@))
        tcp.listen(1)
        unix = socket.socket(socket.AF_UNIX)
        unix.bind('\\0gem-sec-@PORT@')
        unix.listen(1)
        time.sleep(309)
    os._exit(0)
time.sleep(0.3)
"""

RESIDENTS = [
    case("squatted_port_and_abstract_socket_from_a_daemon", "python", LISTENER, S.OK),
    case(
        "squatted_port_from_a_shell_background_job",
        "shell",
        "python3 -c \"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', @PORT@)); s.listen(1); "
        "u = socket.socket(socket.AF_UNIX); u.bind('\\0gem-sec-@PORT@'); u.listen(1); time.sleep(310)\" &\n"
        "sleep 0.3",
        S.OK,
    ),
    case(
        "resident_processes_from_the_shell_session",
        "shell",
        "nohup sleep 311 >/dev/null 2>&1 & setsid sleep 312 & (trap '' TERM HUP; exec sleep 313) & disown -a; sleep 0.2",
        S.OK,
    ),
    case(
        "resident_process_disguised_as_the_agent",
        "bash",
        "(exec -a 'python3 -s -E -m gem_agent --workdir /work' sleep 314) &\n"
        "setsid bash -c \"exec -a 'python3 -s -E -m gem_agent' sleep 315\" &\nsleep 0.2",
        S.OK,
    ),
    case(
        "resident_process_from_a_kernel_cell",
        "kernel",
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(316)\n    os._exit(0)",
        S.OK,
    ),
]


@pytest.mark.parametrize("case", RESIDENTS)
async def test_resident_processes_and_squatted_sockets_do_not_survive_the_reset(harness, case):
    await harness.verify(case)


STATE = [
    case(
        "shell_variables_functions_aliases_traps_and_cwd",
        "shell",
        "export GEM_PLANTED=1; GEM_LOCAL=1; cd /tmp; gem_fn() { echo PLANTED; }; alias ls='echo PLANTED'; "
        "trap 'echo PLANTED' DEBUG; set -o noclobber; umask 077; shopt -s expand_aliases",
        S.OK,
    ),
    case(
        "kernel_globals_builtins_and_modules",
        "kernel",
        "import builtins, os, sys\ngem_planted = 1\nbuiltins.gem_planted = 1\nos.environ['GEM_PLANTED'] = '1'\n"
        "sys.modules['json'] = None\nos.chdir('/tmp')",
        S.OK,
    ),
]


@pytest.mark.parametrize("case", STATE)
async def test_shell_and_kernel_state_is_gone_for_the_next_tenant(harness, case):
    await harness.verify(case)
