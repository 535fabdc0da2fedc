"""EZTrace's Pthread object addresses and return values in the request column
(compensate/formats/otf2/syncobjects.py), on both OTF2 paths, and a record whose
attribute is typed unlike its definition read as otf2-print reads it."""

from __future__ import annotations

import numpy as np

from compensate.formats.otf2 import read_otf2
from compensate.formats.otf2.read import read_otf2_chunks
from compensate.formats.otf2.syncobjects import tolerate_attribute_types
from compensate.model import ENTER, LEAVE

from ...conftest import ROOT

TRYLOCK = ROOT / "tests" / "data" / "eztrace" / "trylock" / "eztrace_log.otf2"


def test_trylock_return_values_and_addresses_on_both_paths():
    """Every trylock's Leave has its return value (0 here: both threads got the
    mutex each time), every lock call's Enter its address; the C path agrees."""
    whole = read_otf2(str(TRYLOCK))
    _, chunks = read_otf2_chunks(str(TRYLOCK), None, payload=False)
    native = {loc: ev.request for chunk in chunks for loc, ev in chunk.items()}
    names = whole.definitions.regions
    tries = [r for r, n in names.items() if n == "pthread_mutex_trylock"]
    locks = [r for r, n in names.items() if n.startswith(("pthread_mutex", "pthread_spin"))]
    for loc, ev in whole.events.items():
        np.testing.assert_array_equal(ev.request, native[loc])
        leave = (ev.kind == LEAVE) & np.isin(ev.region, tries)
        enter = (ev.kind == ENTER) & np.isin(ev.region, locks)
        assert (ev.request[leave] == 0).all() and (ev.request[enter] > 0).all()
    assert sum(int(((ev.kind == LEAVE) & np.isin(ev.region, tries)).sum())
               for ev in whole.events.values()) == 6


def test_tolerating_attribute_types_is_idempotent():
    from otf2.attribute_list import AttributeList
    tolerate_attribute_types()
    once = AttributeList._construct
    tolerate_attribute_types()
    assert AttributeList._construct == once and once.__func__.tolerant
