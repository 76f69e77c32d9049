"""e2b's sandbox metrics (``GET /sandboxes/{id}/metrics``, the SDK's ``get_metrics``).

e2b samples its VMs every few seconds; here a sample is taken when metrics are asked for, by
a run in the sandbox (:data:`_SCRIPT`) that reads what its pid namespace shows: the CPU time
of every process in it (with what they reaped), their resident memory, and the work dir's
disk use. The answer is every sample the sandbox has had, within ``start`` and ``end``; CPU
use is the share of the sandbox's CPUs used since the sample before (or since it started).
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from gem_sandbox.service.e2b.control import api_tenant, e2b_lease
from gem_sandbox.service.e2b.filesystem import json_answer
from gem_sandbox.service.e2b.state import Sample
from gem_sandbox.service.e2b.wire import Endpoint, plain_error
from gem_sandbox.service.errors import Problem, bad_request
from gem_sandbox.service.state import Service

RUN_TIMEOUT = 10.0
_SCRIPT = r"""
import json, os
tick, page, cpu, rss = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE"), 0, 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open("/proc/%s/stat" % pid) as f:
            fields = f.read().rpartition(")")[2].split()
        with open("/proc/%s/statm" % pid) as f:
            rss += int(f.read().split()[1]) * page
    except (OSError, IndexError):
        continue  # gone meanwhile
    cpu += sum(int(n) for n in fields[11:15]) / tick  # utime, stime, cutime, cstime
disk = os.statvfs(".")
print(json.dumps({"cpu_s": cpu, "mem": rss, "disk_used": (disk.f_blocks - disk.f_bfree) * disk.f_frsize,
                  "disk_total": disk.f_blocks * disk.f_frsize}))
"""


async def get_metrics(request: web.Request) -> web.Response:
    service, lease = Service.of(request), e2b_lease(request)
    start, end = _bound(request, "start", 0.0), _bound(request, "end", math.inf)
    async with service.leases.using(lease.tenant, lease.id) as sandbox:
        result = await sandbox.run(_SCRIPT, "python", timeout=RUN_TIMEOUT)
    reading = json_answer(result)
    if reading is None:
        raise Problem(503, "unavailable", f"the sandbox's metrics could not be read ({result.status.value})")
    spec, samples = service.runtime.config.spec, lease.e2b.samples  # type: ignore[union-attr]
    cpus = max(1, math.ceil(spec.cpus))
    now = time.time()
    since, before = (samples[-1].at, samples[-1].cpu_s) if samples else (lease.started, 0.0)
    share = (reading["cpu_s"] - before) / max(now - since, 1e-3) / cpus
    samples.append(
        Sample(now, reading["cpu_s"], {
            "cpuCount": cpus,
            "cpuUsedPct": round(100 * min(max(share, 0.0), 1.0), 2),
            "memUsed": reading["mem"],
            "memTotal": spec.memory_mb * 1024 * 1024,
            "memCache": 0,
            "diskUsed": reading["disk_used"],
            "diskTotal": reading["disk_total"],
        })
    )  # fmt: skip
    return web.json_response([_metric(sample) for sample in samples if start <= int(sample.at) <= end])


def _metric(sample: Sample) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(sample.at, UTC)
    return {"timestamp": stamp.isoformat().replace("+00:00", "Z"), "timestampUnix": int(sample.at), **sample.figures}


def _bound(request: web.Request, name: str, default: float) -> float:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise bad_request(f"{name} must be a Unix time in seconds, got {raw!r}") from None


ROUTES = (Endpoint("GET", "/sandboxes/{id}/metrics", get_metrics, api_tenant, plain_error),)
