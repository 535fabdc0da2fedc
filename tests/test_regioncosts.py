"""compensate/regioncosts.py: a platform's per-region costs bound to a trace's
region ids (several ids per name, names with any characters), and
:meth:`Platform.region_costs`, which binds once per trace's names."""

import numpy as np
import pytest

from compensate.model import KIND_CODE
from compensate.platform import Platform
from compensate.regioncosts import bind

ENTER, LEAVE, SEND = KIND_CODE["Enter"], KIND_CODE["Leave"], KIND_CODE["MpiSend"]
# EZTrace numbers rank r's regions from r * 2^30: one name, one id per rank
NAMES = {1: "pthread_mutex_lock", (1 << 30) + 1: "pthread_mutex_lock", 2: "work",
         3: "a.b c/\"d\"", (1 << 30) + 3: "a.b c/\"d\""}


def test_every_id_of_a_name_is_bound_and_only_named_records_change():
    bound = bind({"pthread_mutex_lock": {"Enter": 2e-7}, "a.b c/\"d\"": {"Leave": 5e-7}},
                 {"pthread_mutex_lock": {"Leave": 1e-8}}, NAMES)
    assert bound.names == ("a.b c/\"d\"", "pthread_mutex_lock")
    assert bound.ids.tolist() == [1, 3, (1 << 30) + 1, (1 << 30) + 3]
    kinds = np.array([ENTER, LEAVE, ENTER, LEAVE, SEND, ENTER, LEAVE, ENTER], np.int16)
    regions = np.array([1, 1, (1 << 30) + 1, 3, 1, 2, (1 << 30) + 3, 99], np.int64)
    o = bound.apply(np.full(8, 1e-7), kinds, regions, "cost")
    # lock's Enter (both ids), the dotted name's Leave (both ids); its Enter, lock's
    # Leave, a send of region 1, region "work" and an undefined id keep the kind's
    assert o.tolist() == [2e-7, 1e-7, 2e-7, 5e-7, 1e-7, 1e-7, 5e-7, 1e-7]
    pre = bound.apply(np.zeros(8), kinds, regions, "pre")
    assert pre.tolist() == [0, 1e-8, 0, 0, 0, 0, 0, 0]
    assert bound.matches(kinds, regions).tolist() == [2, 3]  # (Enter and Leave both count)


def test_a_name_the_trace_does_not_define_binds_no_id():
    bound = bind({"pthread_mutex_lok": {"Enter": 2e-7}}, {}, NAMES)
    assert bound.names == ("pthread_mutex_lok",) and bound.ids.size == 0
    kinds, regions = np.array([ENTER, LEAVE], np.int16), np.array([1, 1])
    assert bound.apply(np.ones(2), kinds, regions, "cost").tolist() == [1.0, 1.0]
    assert bound.matches(kinds, regions).tolist() == [0]


def test_the_binding_is_built_once_per_names_and_again_for_other_names():
    plat = Platform(1e-7, overhead_by_region={"work": {"Enter": 3e-7}})
    names = dict(NAMES)
    first = plat.region_costs(names)
    assert plat.region_costs(names) is first
    assert plat.region_costs(dict(NAMES)) is not first  # another trace's definitions
    names[7] = "work"  # definitions that grew: bound again
    again = plat.region_costs(names)
    assert again is not first and again.ids.tolist() == [2, 7]
    assert Platform(1e-7).region_costs(names) is None  # no entries: nothing bound


def test_a_platform_with_entries_needs_the_region_names():
    plat = Platform(1e-7, overhead_by_region={"work": {"Enter": 3e-7}})
    with pytest.raises(ValueError, match="region names"):
        plat.location_overheads(0, np.array([ENTER]), np.array([2]))
    got = plat.location_overheads(0, np.array([ENTER, LEAVE]), np.array([2, 2]), names=NAMES)
    assert got.tolist() == [3e-7, 1e-7]
    # a location with an in-situ table keeps its table's values
    insitu = Platform(1e-7, overhead_by_region={"work": {"Enter": 3e-7}},
                      by_location={5: ({"Enter": 4e-8, "Leave": 4e-8}, {})})
    assert insitu.location_overheads(5, np.array([ENTER]), np.array([2]),
                                     names=NAMES).tolist() == [4e-8]
    assert insitu.location_overheads(6, np.array([ENTER]), np.array([2]),
                                     names=NAMES).tolist() == [3e-7]


def test_close_and_scattered_ids_are_looked_up_alike():
    """One rank's ids (close together: a dense table) and ids of ranks far apart (a
    binary search) give each record the same row; records of other kinds none."""
    rng = np.random.default_rng(1)
    n = 500
    kinds = rng.choice([ENTER, LEAVE, SEND], n).astype(np.int16)
    local = rng.integers(0, 6, n)
    far = rng.integers(0, 2, n) << 33  # (the scattered case: half of them 2^33 away)
    for regions in (local, local + far):
        names = {r: f"r{(r & 7) % 3}" for r in np.unique(regions).tolist()}
        bound = bind({"r1": {"Enter": 1.0}, "r2": {"Leave": 2.0}}, {}, names)
        rows = bound.rows(kinds, regions)
        el = (kinds == ENTER) | (kinds == LEAVE)
        named = el & np.isin(local % 3, [1, 2])
        assert np.array_equal(rows >= 0, named)
        assert np.array_equal(bound.ids[rows[named]], regions[named])
        got = bound.apply(np.zeros(n), kinds, regions, "cost")
        want = np.where(named & (local % 3 == 1) & (kinds == ENTER), 1.0,
                        np.where(named & (local % 3 == 2) & (kinds == LEAVE), 2.0, 0.0))
        assert np.array_equal(got, want)
