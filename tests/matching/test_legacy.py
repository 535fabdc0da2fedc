"""Legacy OpenMP records of older Score-P (compensate/matching/legacy.py; OmpFork,
OmpJoin, OmpAcquireLock/OmpReleaseLock, OmpTaskCreate/Switch/Complete): the
hand-computed case tests/cases/r8_legacy.trace written as a real OTF2 archive with
the otf2 library, read back through the OTF2 reader, matched and compensated like
the text case (the field names come from the OTF2 event objects there)."""

import numpy as np

from compensate.engine import EngineOptions, compensate
from compensate.formats.otf2 import read_otf2
from compensate.formats.text import read_text
from compensate.matching import match
from compensate.model import KIND_NAMES
from compensate.platform import Platform
from compensate.verify import verify

from ..conftest import CASES


def _write_archive(trace, path) -> str:
    """``trace`` (one process, CPU threads) as an OTF2 archive of the same records."""
    import otf2
    from otf2.enums import LocationType, Paradigm, RegionRole
    with otf2.writer.open(str(path), timer_resolution=10**9) as w:
        node = w.definitions.system_tree_node("node")
        group = w.definitions.location_group("rank 0", system_tree_parent=node)
        regions = {}
        for rid, name in trace.definitions.regions.items():
            role, paradigm = trace.definitions.region_roles.get(rid, ("FUNCTION", "USER"))
            regions[rid] = w.definitions.region(name, region_role=getattr(RegionRole, role),
                                                paradigm=getattr(Paradigm, paradigm))
        for loc, ev in trace.events.items():
            ew = w.event_writer_from_location(w.definitions.location(
                f"thread {loc}", type=LocationType.CPU_THREAD, group=group))
            for i in range(len(ev.time)):
                kind, t = KIND_NAMES[ev.kind[i]], int(ev.time[i])
                if kind in ("Enter", "Leave"):
                    ew.write(getattr(otf2.events, kind)(t, regions[int(ev.region[i])]))
                else:
                    fields = {k: int(v) for k, v in (ev.payload[i] or {}).items()}
                    ew.write(getattr(otf2.events, kind)(t, **fields))
    return str(path / "traces.otf2")


def test_legacy_archive_matches_and_compensates_like_the_text_case(tmp_path):
    text = read_text(str(CASES / "r8_legacy.trace"))
    archive = read_otf2(_write_archive(text, tmp_path / "legacy"))
    m_text, m_otf2 = match(text), match(archive)
    counts = m_otf2.counts()["threads"]
    assert counts == m_text.counts()["threads"]
    assert (counts["fork"], counts["join"], counts["lock"], counts["task"],
            counts["taskwait"], counts["barrier"], counts["unmatched"]) == (1, 1, 1, 1, 1, 1, 0)
    opts = EngineOptions(bound="lower", collective_exit="uniform")
    want = compensate(text, Platform(1e-7), opts, m_text).trace
    got = compensate(archive, Platform(1e-7), opts, m_otf2).trace
    assert verify(got, m_otf2).ok
    for loc, ev in want.events.items():
        np.testing.assert_array_equal(got.events[loc].time, ev.time)
