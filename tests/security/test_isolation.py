"""What sandbox code cannot reach: the network, the host's loopback and secrets, root, the
agent, the kernel's knobs. Each payload prints what it observed and exits non-zero on an
escape, so a breach shows up as the payload's own ``error`` with the reason on stderr."""

from __future__ import annotations

import pytest

from gem_sandbox.sandbox.result import ExecResult
from tests.security.harness import S, case

pytestmark = pytest.mark.anyio


def _blocked(result: ExecResult) -> None:
    assert result.stdout.startswith("blocked"), f"not blocked: {result!r}"


def _said(text: str):
    def check(result: ExecResult) -> None:
        assert result.stdout.strip() == text, f"stdout {result.stdout!r}, expected {text!r}: {result!r}"

    return check


def connect(address: str, family: str = "AF_INET", kind: str = "SOCK_STREAM") -> str:
    return f"""
import socket
ADDRESS = {address}
s = socket.socket(socket.{family}, socket.{kind})
s.settimeout(1)
try:
    s.connect(ADDRESS)
    if socket.{kind} == socket.SOCK_DGRAM:
        s.send(b'x')
        s.recv(1)
except OSError as exc:
    print('blocked', type(exc).__name__)
else:
    raise SystemExit('ESCAPED: reached %r' % (ADDRESS,))
"""


NETWORK = [
    case("tcp_to_1_1_1_1_port_53", "python", connect("('1.1.1.1', 53)"), S.OK, expect=_blocked),
    case(
        "udp_sendto_1_1_1_1_port_53",
        "python",
        """
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(1)
        try:
            s.sendto(b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01', ('1.1.1.1', 53))
            s.recvfrom(512)
        except OSError as exc:
            print('blocked', type(exc).__name__)
        else:
            raise SystemExit('ESCAPED: a DNS answer came back')
        """,
        S.OK,
        expect=_blocked,
    ),
    case(
        "dns_lookup",
        "python",
        """
        import socket
        try:
            found = socket.getaddrinfo('example.com', 80)
        except OSError as exc:
            print('blocked', type(exc).__name__)
        else:
            raise SystemExit('ESCAPED: resolved %s' % found[:1])
        """,
        S.OK,
        expect=_blocked,
    ),
    case("cloud_metadata_169_254_169_254", "python", connect("('169.254.169.254', 80)"), S.OK, expect=_blocked),
    case("the_hosts_loopback_listener", "python", connect("('127.0.0.1', @HOST_PORT@)"), S.OK, expect=_blocked),
    case(
        "the_hosts_abstract_unix_socket",
        "python",
        connect("'\\0gem-sec-host-@HOST_PORT@'", "AF_UNIX"),
        S.OK,
        expect=_blocked,
    ),
    case(
        "only_a_loopback_interface_and_no_raw_sockets",
        "python",
        """
        import socket
        names = [name for _, name in socket.if_nameindex()]
        if names != ['lo']:
            raise SystemExit('ESCAPED: interfaces %s' % names)
        for family, kind in ((socket.AF_INET, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)):
            try:
                socket.socket(family, kind, 0 if family == socket.AF_INET else 3).close()
            except (OSError, ValueError):
                continue
            raise SystemExit('ESCAPED: opened a raw socket %r' % family)
        print('blocked')
        """,
        S.OK,
        expect=_blocked,
    ),
]


@pytest.mark.parametrize("case", NETWORK)
async def test_network_egress_and_the_hosts_services_are_unreachable(harness, case):
    await harness.verify(case)


HOST = [
    case(
        "docker_socket_absent",
        "python",
        """
        import os
        for path in ('/var/run/docker.sock', '/run/docker.sock', '/run/containerd/containerd.sock', '/run/podman/podman.sock'):
            if os.path.exists(path):
                raise SystemExit('ESCAPED: %s is present' % path)
        print('absent')
        """,
        S.OK,
        expect=_said("absent"),
    ),
    case(
        "host_environment_invisible",
        "python",
        """
        import glob, os
        secret = '@SECRET@'
        if 'GEM_SECURITY_HOST_SECRET' in os.environ or any(secret in v for v in os.environ.values()):
            raise SystemExit('ESCAPED: the host secret is in os.environ')
        for path in glob.glob('/proc/*/environ'):
            try:
                data = open(path, 'rb').read()
            except OSError:
                continue
            if secret.encode() in data or b'GEM_SECURITY_HOST_SECRET' in data:
                raise SystemExit('ESCAPED: the host secret is in %s' % path)
        print('clean')
        """,
        S.OK,
        expect=_said("clean"),
    ),
    case(
        "host_processes_invisible",
        "python",
        """
        import os
        seen = []
        for pid in os.listdir('/proc'):
            if pid.isdigit():
                try:
                    seen.append(open('/proc/%s/cmdline' % pid, 'rb').read())
                except OSError:
                    pass
        leaks = [c for c in seen if any(w in c for w in (b'pytest', b'dockerd', b'containerd', b'systemd', b'sshd'))]
        if leaks:
            raise SystemExit('ESCAPED: host processes visible: %r' % leaks[:3])
        print('clean')
        """,
        S.OK,
        expect=_said("clean"),
    ),
    case(
        "dev_has_only_the_minimal_devices",
        "python",
        """
        import os, stat
        allowed = {'console', 'core', 'fd', 'full', 'mqueue', 'null', 'ptmx', 'pts', 'random',
                   'shm', 'stderr', 'stdin', 'stdout', 'tty', 'urandom', 'zero'}
        extra = sorted(set(os.listdir('/dev')) - allowed)
        if extra:
            raise SystemExit('ESCAPED: extra devices %s' % extra)
        for name in os.listdir('/dev'):
            st = os.lstat('/dev/' + name)
            if stat.S_ISBLK(st.st_mode):
                raise SystemExit('ESCAPED: block device /dev/%s' % name)
        print('minimal')
        """,
        S.OK,
        expect=_said("minimal"),
    ),
]


@pytest.mark.parametrize("case", HOST)
async def test_the_host_is_invisible(harness, case):
    await harness.verify(case)


PRIVILEGE = [
    case(
        "no_effective_capabilities",
        "python",
        """
        fields = dict(line.split(':\\t', 1) for line in open('/proc/self/status') if ':\\t' in line)
        for key in ('CapEff', 'CapPrm', 'CapAmb'):
            if int(fields[key], 16):
                raise SystemExit('ESCAPED: %s is %s' % (key, fields[key].strip()))
        if fields.get('NoNewPrivs', '1').strip() != '1':
            raise SystemExit('ESCAPED: NoNewPrivs is off')
        import os
        if 0 in (os.getuid(), os.geteuid(), os.getgid(), os.getegid()):
            raise SystemExit('ESCAPED: runs as root')
        print('unprivileged')
        """,
        S.OK,
        expect=_said("unprivileged"),
    ),
    case(
        "setuid_binaries_do_not_give_root",
        "python",
        """
        import os, stat, subprocess, time
        found = []
        for d in ('/usr/bin', '/usr/sbin', '/usr/lib/openssh', '/usr/lib/dbus-1.0'):
            if os.path.isdir(d):
                for name in os.listdir(d):
                    path = os.path.join(d, name)
                    try:
                        if os.stat(path).st_mode & stat.S_ISUID:
                            found.append(path)
                    except OSError:
                        pass
        for path in found:
            try:
                child = subprocess.Popen([path, '--help'], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except OSError:
                continue
            time.sleep(0.05)
            uids = [l for l in open('/proc/%d/status' % child.pid) if l.startswith('Uid:')]
            child.kill()
            child.wait()
            if uids and uids[0].split()[2] == '0':
                raise SystemExit('ESCAPED: %s ran with euid 0' % path)
        print('no root', len(found))
        """,
        S.OK,
        expect=lambda r: r.stdout.startswith("no root") or pytest.fail(f"{r!r}"),
    ),
    case(
        "setuid_and_mount_syscalls_fail",
        "python",
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        for attempt in (lambda: os.setuid(0), lambda: os.setgid(0), lambda: os.chroot('/tmp')):
            try:
                attempt()
            except OSError:
                continue
            raise SystemExit('ESCAPED: a privileged call succeeded')
        if libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0:
            raise SystemExit('ESCAPED: mounted a tmpfs')
        print('denied')
        """,
        S.OK,
        expect=_said("denied"),
    ),
    case(
        "new_user_namespace_gives_no_power_over_the_sandbox",
        "python",
        """
        import ctypes, os, signal
        libc = ctypes.CDLL(None, use_errno=True)
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
            print('denied')
            raise SystemExit(0)
        try:
            open('/proc/self/setgroups', 'w').write('deny')
            open('/proc/self/uid_map', 'w').write('0 %d 1' % uid)
            open('/proc/self/gid_map', 'w').write('0 %d 1' % gid)
        except OSError:
            pass
        escapes = []
        try:
            os.kill(@AGENT_PID@, signal.SIGKILL)
            escapes.append('killed the agent')
        except OSError:
            pass
        for path in ('/usr/gem-sec', '/etc/gem-sec', '/opt/gem-sandbox/gem-sec'):
            try:
                open(path, 'w').close()
                escapes.append('wrote ' + path)
            except OSError:
                pass
        if libc.mount(b'none', b'/work', b'tmpfs', 0, None) == 0:
            escapes.append('mounted over /work')
        if escapes:
            raise SystemExit('ESCAPED: %s' % escapes)
        print('denied')
        """,
        S.OK,
        expect=_said("denied"),
    ),
    case(
        "unshare_command_fails_or_stays_contained",
        "bash",
        "if unshare -Ur true 2>/dev/null; then unshare -Ur sh -c 'touch /usr/gem-sec 2>/dev/null && echo ESCAPED || echo denied'; else echo denied; fi",
        S.OK,
        expect=_said("denied"),
    ),
]


@pytest.mark.parametrize("case", PRIVILEGE)
async def test_runs_cannot_gain_privilege(harness, case):
    await harness.verify(case)


def write_denied(path: str, data: str = "1") -> str:
    return f"""
import os
try:
    with open({path!r}, 'w') as f:
        f.write({data!r})
except OSError as exc:
    print('denied')
else:
    raise SystemExit('ESCAPED: wrote {path}')
"""


WRITES = [
    case("write_proc_sys_kernel_hostname", "python", write_denied("/proc/sys/kernel/hostname", "pwned"), S.OK, expect=_said("denied")),
    case("write_proc_sys_vm_drop_caches", "python", write_denied("/proc/sys/vm/drop_caches", "3"), S.OK, expect=_said("denied")),
    case("write_proc_sysrq_trigger", "python", write_denied("/proc/sysrq-trigger", "h"), S.OK, expect=_said("denied")),
    case("write_sys_kernel", "python", write_denied("/sys/kernel/mm/transparent_hugepage/enabled", "never"), S.OK, expect=_said("denied")),
    case("create_a_file_in_usr_bin", "python", write_denied("/usr/bin/gem-sec", "x"), S.OK, expect=_said("denied")),
    case("append_to_etc_passwd", "python", write_denied("/etc/passwd", "evil::0:0::/:/bin/sh\n"), S.OK, expect=_said("denied")),
    case("modify_the_agents_code", "python", write_denied("/opt/gem-sandbox/gem_agent/__init__.py", "x"), S.OK, expect=_said("denied")),
]


@pytest.mark.parametrize("case", WRITES)
async def test_system_paths_are_read_only(harness, case):
    await harness.verify(case)


def signal_has_no_effect(pid: str) -> str:
    """Signals the process; each must be refused, or leave it running (the init of a pid
    namespace ignores signals it has no handler for). A stopped target is resumed."""
    return f"""
import os, signal, time
target = {pid}
effects = []
for sig in (0, signal.SIGSTOP, signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
    try:
        os.kill(target, sig)
    except PermissionError:
        continue
    time.sleep(0.1)
    try:
        state = open('/proc/%d/stat' % target).read().rsplit(')', 1)[1].split()[0]
    except OSError:
        effects.append('pid %d is gone after signal %d' % (target, sig))
        break
    if state in 'TtZX':
        effects.append('pid %d is in state %s after signal %d' % (target, state, sig))
        os.kill(target, signal.SIGCONT)
if effects:
    raise SystemExit('ESCAPED: %s' % effects)
print('no effect')
"""


AGENT = [
    case("signal_the_agent", "python", signal_has_no_effect("@AGENT_PID@"), S.OK, expect=_said("no effect")),
    case("signal_the_sandboxes_init", "python", signal_has_no_effect("1"), S.OK, expect=_said("no effect")),
    case(
        "ptrace_attach_to_the_agent",
        "python",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
            if libc.ptrace(request, @AGENT_PID@, None, None) == 0:
                raise SystemExit('ESCAPED: ptrace request %#x on the agent succeeded' % request)
        print('denied')
        """,
        S.OK,
        expect=_said("denied"),
    ),
    case(
        "kill_minus_one_reaches_nothing_that_matters",
        "python",
        "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    pass\nraise SystemExit(1)",
        S.ERROR,
        exit_code=1,
    ),
]


@pytest.mark.parametrize("case", AGENT)
async def test_runs_cannot_touch_the_agent(harness, case):
    await harness.verify(case)
