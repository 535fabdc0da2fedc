"""Hand-computed `.trace` cases (tests/cases/*.trace) covering every branch of the
compensation rules. Each file states its platform and the expected approximated
times, with the arithmetic, in `#` comments:

    # platform: {...json...}
    # expect <lower|upper|uniform|per-process|any> <location>: t0 t1 ...
    # expect-stat <counter> <value>
    # expect-stop <location>: <BufferFlush stop times>
    # expect-dep <dependency counter of Matching.counts()> <value>
    # eager-limit: <bytes>   (MPI_Send above it is synchronous)
"""

import json

import numpy as np
import pytest

from compensate.engine import EngineOptions, compensate
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.model import BUFFER_FLUSH
from compensate.platform import Platform
from compensate.verify import verify

from ..conftest import CASES

CASE_FILES = sorted(CASES.glob("*.trace"))
VARIANTS = [("lower", "uniform"), ("upper", "uniform"), ("lower", "per-process"),
            ("upper", "per-process")]


def parse_expectations(path):
    platform, expect, stats, stops = None, [], {}, {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("# eager-limit:"):
            stats["eager_limit"] = int(line.split(":", 1)[1])
        elif line.startswith("# expect-dep"):
            _, _, name, value = line.split()
            stats["dep:" + name] = int(value)
        elif line.startswith("# platform:"):
            platform = Platform.from_dict(json.loads(line.split(":", 1)[1]))
        elif line.startswith("# expect-stat"):
            _, _, name, value = line.split()
            stats[name] = int(value)
        elif line.startswith("# expect-stop"):
            head, times = line[len("# expect-stop"):].split(":")
            stops[int(head)] = [int(x) for x in times.split()]
        elif line.startswith("# expect "):
            head, times = line[len("# expect "):].split(":")
            variant, loc = head.split()
            expect.append((variant, int(loc), [int(x) for x in times.split()]))
    assert platform is not None and expect, f"{path.name} lacks platform or expectations"
    return platform, expect, stats, stops


def test_every_branch_has_a_case():
    names = {p.stem for p in CASE_FILES}
    for required in ("r1_bykind", "r1_overcomp", "r1_same_timestamp", "r2_m1_a1", "r2_m1_a2",
                     "r2_m2_gap",
                     "r2_m2_early", "r3_nton", "r4_bcast", "r6_flush",
                     # issue #5: nonblocking, synchronous, Sendrecv, n-to-1, scans,
                     # nonblocking collectives, cancelled requests, send to self
                     "r5_nonblocking_m1", "r5_waitall", "r5_ssend_receiver_late",
                     "r5_ssend_sender_late", "r5_eager_limit", "r5_sendrecv", "r5_gather",
                     "r5_scan", "r5_ibarrier", "r5_ibarrier_waited", "r5_cancelled_self",
                     # issue 22: MPI_Sendrecv's send part with a network model
                     "r5_sendrecv_network",
                     # issue 16: handle collectives, nonblocking 1-to-n and n-to-1
                     "r5_handles", "r5_ibcast", "r5_igather",
                     # issue 16: matched probes (Mprobe + Mrecv, Improbe + Imrecv)
                     "r5_mrecv", "r5_imrecv",
                     # session 14: a plain MPI_Probe after the send of the message it found
                     "r5_probe",
                     # issue 17: thread fork/join and locks
                     "r8_fork_join", "r8_lock", "r8_barrier", "r8_pthread", "r8_task", "r8_legacy",
                     # issue 17 follow-up: a lock handed across parallel regions
                     "r8_lock_regions",
                     # issue 17: accelerators, kernel launch and synchronize
                     "r9_launch_sync", "r9_sync_done",
                     # issue 20: MPI-4 partitioned point-to-point
                     "r11_partitioned",
                     # issue 19: MPI one-sided, fences, PSCW, passive-target locks
                     "r10_fence", "r10_pscw", "r10_lock", "r10_lock_deposit",
                     "r10_lock_release_after_completion"):
        assert required in names


@pytest.mark.parametrize("bound,exit_", VARIANTS, ids=lambda v: str(v))
@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.stem)
def test_case(path, bound, exit_):
    platform, expect, stats, stops = parse_expectations(path)
    trace = read_text(str(path))
    matching = match(trace, eager_limit=stats.get("eager_limit"))
    result = compensate(trace, platform, EngineOptions(bound=bound, collective_exit=exit_),
                        matching)
    checked = 0
    for variant, loc, times in expect:
        if variant in ("any", bound, exit_):
            got = result.trace.events[loc].time.tolist()
            assert got == times, f"{path.name} {bound}/{exit_} location {loc}"
            checked += 1
    assert checked, f"{path.name}: no expectation applies to {bound}/{exit_}"
    flat = result.stats.to_dict()
    flat.update(result.stats.p2p_cases)
    for name, value in stats.items():
        if name in ("m1_a1", "m1_a2") or name == "overcompensated":
            assert flat[name] == value, f"{path.name}: {name}"
    deps = matching.counts()
    for name, value in stats.items():
        if name.startswith("dep:"):
            got = deps
            for part in name[4:].split("."):  # nested counts: threads.fork
                got = got[part]
            assert got == value, f"{path.name}: {name}"
    for loc, want in stops.items():
        ev = result.trace.events[loc]
        assert ev.size[ev.kind == BUFFER_FLUSH].tolist() == want
    assert verify(result.trace, result.matching).ok


def test_bound_none_is_identity():
    for path in CASE_FILES:
        trace = read_text(str(path))
        result = compensate(trace, Platform(1e-7), EngineOptions(bound="none"))
        for loc, ev in trace.events.items():
            assert np.array_equal(result.trace.events[loc].time, ev.time)
