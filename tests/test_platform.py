"""The platform file (compensate.platform): one schema, checked field by field with a
one-line message; the hand validator agrees with ``jsonschema`` on the shipped schema."""

import json
import math
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compensate.model import KIND_CODE, KIND_NAMES
from compensate.platform import (
    SCHEMA_PATH,
    Platform,
    PlatformError,
    first_problem,
    parse_duration,
    schema,
)

from .inprocess import run_compensate

ROOT = Path(__file__).resolve().parent.parent
GOOD = {"event_overhead": 1e-6, "copy_time": [{"bytes": 64, "seconds": 1.6e-8},
                                              {"bytes": 4096, "seconds": 1e-6}]}


def with_(**changes) -> dict:
    data = json.loads(json.dumps(GOOD))
    data.update(changes)
    return data


CASES = [  # (file content, the message after "p.json: ")
    (with_(event_overhead="1e-6"), 'event_overhead: expected a number, got the string "1e-6"'),
    (with_(event_overhead=True), "event_overhead: expected a number, got the boolean true"),
    (with_(event_overhead=-1e-6), "event_overhead: must be >= 0, got -1e-06"),
    (with_(event_overhead=math.nan), "event_overhead: expected a finite number, got NaN"),
    (with_(event_overhead=math.inf), "event_overhead: expected a finite number, got Infinity"),
    (with_(copy_time=[{"bytes": 4096, "seconds": 1e-6}, {"bytes": 1024, "seconds": 1e-7}]),
     "copy_time[1].bytes: sizes must increase (1024 after 4096)"),
    (with_(copy_time=[{"bytes": 64, "seconds": 1e-8}, {"bytes": 64, "seconds": 1e-8}]),
     "copy_time[1].bytes: sizes must increase (64 after 64)"),
    (with_(copy_time=[{"bytes": 64, "seconds": -1.0}]),
     "copy_time[0].seconds: must be >= 0, got -1.0"),
    (with_(copy_time=[{"bytes": 0, "seconds": 1.0}]), "copy_time[0].bytes: must be >= 1, got 0"),
    (with_(copy_time=[{"bytes": 1.5, "seconds": 1.0}]),
     "copy_time[0].bytes: expected an integer (a whole number), got the number 1.5"),
    (with_(copy_time=[{"bytes": 64}]),
     "copy_time[0]: missing required field 'seconds' (seconds to copy a buffer of that size once)"),
    (with_(copy_time=[{"bytes": 64, "seconds": 1e-8, "secs": 1}]),
     "copy_time[0]: unknown field 'secs' (did you mean 'seconds'?)"),
    (with_(copy_time={"64": 1e-8}), "copy_time: expected a list, got an object"),
    (with_(event_overhead_by_kind={"Mertic": 1e-6}),
     "event_overhead_by_kind: 'Mertic' is not an OTF2 record kind (did you mean 'Metric'?)"),
    (with_(event_overhead_by_kind={"Metric": "2us"}),
     'event_overhead_by_kind.Metric: expected a number, got the string "2us"'),
    (with_(event_overheads=1e-6),
     "unknown field 'event_overheads' (did you mean 'event_overhead'?)"),
    (with_(device_overhead=-1e-9), "device_overhead: must be >= 0, got -1e-09"),
    (with_(format=2), "format: unsupported value 2 (expected 1)"),
    (with_(network={"latency": 1e-6}),
     "network: missing required field 'per_byte' (seconds per byte)"),
    (with_(network={"latency": -1e-6, "per_byte": 0}),
     "network.latency: must be >= 0, got -1e-06"),
    (with_(network={"latency": 1e-6, "per_byte": 2e-10, "bandwidth": 5e9}),
     "network: unknown field 'bandwidth'"),
    (with_(network=[1e-6, 2e-10]), "network: expected an object, got a list"),
    (with_(rma={"release": "lazy"}),
     'rma.release: unsupported value "lazy" (expected "eager", "after_completion")'),
    (with_(rma={}), "rma: missing required field 'release' (when MPI_Win_unlock sends the lock's "
     "release: eager or after_completion)"),
    (with_(prefer_insitu="yes"), 'prefer_insitu: expected true or false, got the string "yes"'),
    (with_(event_overhead_by_region={"pthread_mutex_lock": {"Entry": 2e-7}}),
     "event_overhead_by_region.pthread_mutex_lock: unknown field 'Entry' (did you mean 'Enter'?)"),
    (with_(event_overhead_by_region={"a.b c": {"Enter": -1e-9}}),
     "event_overhead_by_region.a.b c.Enter: must be >= 0, got -1e-09"),
    (with_(event_overhead_by_region={"x": 2e-7}),
     "event_overhead_by_region.x: expected an object, got the number 2e-07"),
    (with_(event_overhead_by_region=[]),
     "event_overhead_by_region: expected an object, got a list"),
    (with_(overhead_before_stamp_by_region={"x": {"Leave": "1ns"}}),
     'overhead_before_stamp_by_region.x.Leave: expected a number, got the string "1ns"'),
    (with_(overhead_before_stamp_by_region={"x": {"Enter": 1e-9, "leave": 0}}),
     "overhead_before_stamp_by_region.x: unknown field 'leave' (did you mean 'Leave'?)"),
    ({"copy_time": []},
     "missing required field 'event_overhead' (seconds the tracer adds per record)"),
    ([GOOD], "expected an object, got a list"),
]


@pytest.mark.parametrize("data, message", CASES, ids=[m.split(":")[0] + str(i)
                                                      for i, (_, m) in enumerate(CASES)])
def test_each_problem_is_one_line_naming_file_and_field(tmp_path, data, message):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))  # NaN/Infinity as Python writes (and reads) them
    with pytest.raises(PlatformError) as exc:
        Platform.load(path)
    assert str(exc.value) == f"{path}: {message}"


def test_notes_and_calibration_details_are_accepted_and_ignored():
    data = with_(_comment="measured on node 7", machine={"cpu_count": 2}, date="2026-01-01",
                 event_overhead_by_kind={"Metric": 2e-6})
    data["copy_time"][0].update(iqr=[1e-8, 2e-8], n=5, fresh={"seconds": 3e-8})
    p = Platform.from_dict(data)
    assert p.overhead_by_kind == {"Metric": 2e-6} and list(p.copy_bytes) == [64, 4096]


def test_bad_platform_file_exits_3_with_the_line(tmp_path):
    bad = tmp_path / "platform.json"
    bad.write_text(json.dumps(with_(event_overhead="1e-6")))
    proc = run_compensate(ROOT / "examples" / "pingpong.trace", tmp_path / "out.trace",
                          "--platform", bad, cwd=ROOT)
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines() == [
        f"compensate: error: {bad}: event_overhead: expected a number, got the string \"1e-6\""]
    assert not (tmp_path / "out.trace").exists()


# -- one schema: the hand validator and jsonschema agree --------------------------------

VALIDATOR = jsonschema.Draft202012Validator(schema())


def extra_rules_hold(data) -> bool:
    """The two rules JSON Schema cannot state (finite numbers are given here)."""
    table = data.get("copy_time") if isinstance(data, dict) else None
    if not isinstance(table, list):
        return True
    sizes = [e.get("bytes") for e in table if isinstance(e, dict)]
    if len(sizes) != len(table) or not all(isinstance(b, (int, float)) for b in sizes):
        return True  # the schema already refuses such a table
    if not all(b > a for a, b in zip(sizes, sizes[1:], strict=False)):
        return False
    # x-per-byte-maximum: no copy slower than 1 byte per second
    return all(not _is_number(e.get("seconds")) or e["seconds"] <= e["bytes"] for e in table)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def assert_agree(data) -> None:
    mine = first_problem(data)
    theirs = VALIDATOR.is_valid(data) and extra_rules_hold(data)
    assert (mine is None) == theirs, (data, mine, list(VALIDATOR.iter_errors(data))[:1])


def test_schema_is_valid_and_names_every_record_kind():
    jsonschema.Draft202012Validator.check_schema(schema())
    kinds = schema()["properties"]["event_overhead_by_kind"]["propertyNames"]["enum"]
    assert kinds == list(KIND_NAMES)


def test_schema_ships_with_the_package():
    assert SCHEMA_PATH.parent == ROOT / "compensate"
    cfg = (ROOT / "setup.cfg").read_text()
    assert "[options.package_data]\ncompensate = platform.schema.json" in cfg


def test_docs_describe_every_field_of_the_schema():
    doc = (ROOT / "docs" / "platform-file.md").read_text()
    props = schema()["properties"]
    names = set(props) | set(props["copy_time"]["items"]["properties"])
    assert [n for n in sorted(names) if f"`{n}`" not in doc and f"`copy_time[].{n}`" not in doc] \
        == []


@pytest.mark.parametrize("path", sorted(ROOT.glob("examples/**/*.json")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_bundled_examples_are_valid_for_both(path):
    data = json.loads(path.read_text())
    assert first_problem(data) is None
    assert_agree(data)


def test_network_entry_loads_and_round_trips():
    data = with_(network={"latency": 1e-6, "per_byte": 2e-10, "method": "ping-pong"})
    plat = Platform.from_dict(data)
    assert plat.network == (1e-6, 2e-10)
    back = plat.to_dict()
    assert back["network"] == {"latency": 1e-6, "per_byte": 2e-10}
    assert Platform.from_dict(back).network == plat.network
    assert "network" not in Platform.from_dict(GOOD).to_dict()  # absent: summaries unchanged
    with pytest.raises(PlatformError, match="network"):
        Platform(1e-6, network=(math.nan, 0.0))


def test_rma_entry_loads_and_round_trips():
    data = with_(rma={"release": "after_completion", "method": "unlock durations"})
    plat = Platform.from_dict(data)
    assert plat.rma_release == "after_completion"
    back = plat.to_dict()
    assert back["rma"] == {"release": "after_completion"}
    assert Platform.from_dict(back).rma_release == "after_completion"
    assert "rma" not in Platform.from_dict(GOOD).to_dict()  # absent: summaries unchanged
    with pytest.raises(PlatformError, match="rma.release"):
        Platform(1e-6, rma_release="sometimes")


def test_overhead_before_stamp_loads_round_trips_and_is_bounded_by_the_kind():
    data = with_(event_overhead=1e-7, event_overhead_by_kind={"MpiRecv": 2e-7},
                 overhead_before_stamp={"MpiRecv": 1.5e-7, "Enter": 1e-7})
    plat = Platform.from_dict(data)
    table = plat.before_stamp_table()
    assert table[KIND_CODE["MpiRecv"]] == 1.5e-7 and table[KIND_CODE["Enter"]] == 1e-7
    assert table[KIND_CODE["Leave"]] == 0.0
    assert Platform.from_dict(plat.to_dict()).before_stamp == plat.before_stamp
    assert "overhead_before_stamp" not in Platform.from_dict(GOOD).to_dict()
    with pytest.raises(PlatformError, match="more than the kind's overhead"):
        Platform(1e-7, before_stamp={"Leave": 2e-7})
    with pytest.raises(PlatformError, match="unknown record kind"):
        Platform(1e-7, before_stamp={"Lave": 0.0})
    assert first_problem(with_(overhead_before_stamp={"Enter": -1.0})) is not None
    assert_agree(with_(overhead_before_stamp={"Lave": 1e-9}))


def test_region_overheads_load_round_trip_and_are_bounded_by_the_record():
    regions = {"pthread_mutex_lock": {"Enter": 2.1e-7, "Leave": 2e-7},
               "ns.f[1] \"q\"": {"Leave": 3e-7}}
    data = with_(event_overhead=1.3e-7, event_overhead_by_region=regions,
                 overhead_before_stamp_by_region={"pthread_mutex_lock": {"Leave": 2e-7},
                                                  "other": {"Enter": 1.3e-7}})
    plat = Platform.from_dict(data)
    assert plat.overhead_by_region == regions and plat.has_regions
    back = Platform.from_dict(plat.to_dict())
    assert back.overhead_by_region == regions
    assert back.before_stamp_by_region == plat.before_stamp_by_region
    assert first_problem(plat.to_dict()) is None
    assert_agree(plat.to_dict())
    plain = Platform.from_dict(GOOD).to_dict()  # summaries without them unchanged
    assert "event_overhead_by_region" not in plain
    assert "overhead_before_stamp_by_region" not in plain
    with pytest.raises(PlatformError, match=re.escape(
            "overhead_before_stamp_by_region.x.Enter = 3e-07 s is more than the record's "
            "overhead, event_overhead_by_region.x.Enter = 2e-07 s")):
        Platform(1e-7, overhead_by_region={"x": {"Enter": 2e-7}},
                 before_stamp_by_region={"x": {"Enter": 3e-7}})
    with pytest.raises(PlatformError, match=re.escape(
            "overhead_before_stamp_by_region.x.Leave = 2e-07 s is more than the record's "
            "overhead, the kind's overhead (Leave) = 1e-07 s")):
        Platform(1e-7, before_stamp_by_region={"x": {"Leave": 2e-7}})
    with pytest.raises(PlatformError, match=re.escape(
            "overhead_before_stamp['Enter'] = 5e-08 s is more than "
            "event_overhead_by_region.x.Enter = 3e-08 s")):
        Platform(1e-7, before_stamp={"Enter": 5e-8}, overhead_by_region={"x": {"Enter": 3e-8}})
    with pytest.raises(PlatformError, match="unknown field 'Entry'"):
        Platform(1e-7, overhead_by_region={"x": {"Entry": 3e-8}})
    with pytest.raises(PlatformError, match=r"event_overhead_by_region\.x\.Enter must be"):
        Platform(1e-7, overhead_by_region={"x": {"Enter": 4000.0}})


def test_a_misspelt_region_field_exits_3_with_the_line(tmp_path):
    bad = tmp_path / "platform.json"
    bad.write_text(json.dumps(with_(event_overhead_by_region={"MPI_Send": {"Entry": 1e-7}})))
    proc = run_compensate(ROOT / "examples" / "pingpong.trace", tmp_path / "out.trace",
                          "--platform", bad, cwd=ROOT)
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines() == [
        f"compensate: error: {bad}: event_overhead_by_region.MPI_Send: unknown field 'Entry' "
        f"(did you mean 'Enter'?)"]


def test_prefer_insitu_loads_and_round_trips():
    plat = Platform.from_dict(with_(prefer_insitu=True))
    assert plat.prefer_insitu is True
    assert Platform.from_dict(plat.to_dict()).prefer_insitu is True
    assert not Platform.from_dict(with_(prefer_insitu=False)).prefer_insitu
    assert "prefer_insitu" not in Platform.from_dict(GOOD).to_dict()  # summaries unchanged


def test_what_the_simulator_writes_is_valid_for_both(tmp_path):
    from compensate.simulate import default_platform
    assert_agree(default_platform(1e-6).to_dict())
    assert first_problem(default_platform(1e-6).to_dict()) is None


numbers = st.one_of(st.floats(-1e-3, 1e-2, allow_nan=False), st.integers(-5, 10**7))
junk = st.one_of(st.none(), st.booleans(), st.text(max_size=4), numbers,
                 st.lists(st.integers(0, 3), max_size=2), st.just({}))
entry = st.fixed_dictionaries(
    {"bytes": st.one_of(st.integers(-2, 1 << 20), st.floats(0.5, 64.0), junk),
     "seconds": st.one_of(numbers, junk)},
    optional={"n": st.one_of(st.integers(-1, 9), junk), "iqr": junk, "fresh": junk,
              "secs": numbers})
kinds = st.sampled_from([*KIND_NAMES[:12], "Mertic", "enter"])
platform_files = st.fixed_dictionaries(
    {},
    optional={"format": st.one_of(st.just(1), junk),
              "event_overhead": st.one_of(numbers, junk),
              "device_overhead": st.one_of(numbers, junk),
              "event_overhead_by_kind": st.one_of(
                  st.dictionaries(kinds, st.one_of(numbers, junk), max_size=3), junk),
              "copy_time": st.one_of(st.lists(entry, max_size=4), junk),
              "network": st.one_of(st.fixed_dictionaries(
                  {}, optional={"latency": st.one_of(numbers, junk),
                                "per_byte": st.one_of(numbers, junk),
                                "measured": junk, "bandwith": numbers}), junk),
              "event_overhead_by_region": st.one_of(st.dictionaries(
                  st.sampled_from(["f", "a.b", "", "_x"]), st.one_of(st.dictionaries(
                      st.sampled_from(["Enter", "Leave", "Entry"]), st.one_of(numbers, junk),
                      max_size=2), junk), max_size=2), junk),
              "_comment": junk, "machine": junk, "date": junk, "copy_times": junk})


@pytest.mark.parametrize("data", [d for d, m in CASES if "finite" not in m])
def test_both_validators_refuse_each_hand_made_problem(data):
    """The hand cases above, but NaN and Infinity (JSON Schema cannot refuse them:
    the hand validator's own rule), are refused by both."""
    assert_agree(data)
    assert first_problem(data) is not None


# 200 examples (400 before): the 25 hand-made problems above and the bundled and
# simulated platform files are checked against both validators by hand as well
@settings(max_examples=200, deadline=None)
@given(platform_files)
def test_hand_validator_agrees_with_jsonschema(data):
    assert_agree(data)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 1 << 30), min_size=1, max_size=6, unique=True),
       st.floats(0, 1e-3), st.booleans())
def test_valid_files_from_sorted_tables_load(sizes, overhead, shuffle):
    table = [{"bytes": b, "seconds": b * 1e-10} for b in (sizes if shuffle else sorted(sizes))]
    data = {"format": 1, "event_overhead": overhead, "copy_time": table}
    assert_agree(data)
    if sorted(sizes) == [e["bytes"] for e in table]:
        assert Platform.from_dict(data).copy_time(sizes[0]) == pytest.approx(sizes[0] * 1e-10)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**9), st.sampled_from([("ns", "e-9"), ("us", "e-6"), ("µs", "e-6"),
                                               ("ms", "e-3"), ("s", ""), ("", "")]),
       st.sampled_from(["", ".5", ".25", ".125"]))
def test_durations_are_the_nearest_float_of_their_decimal_value(n, unit, frac):
    # "100ns" must be the float 1e-7, not 100 * 1e-9 = 1.0000000000000001e-07: the
    # command's --overhead 100ns and a platform file's 1e-7 must compensate alike
    text, exponent = f"{n}{frac}", unit[1]
    assert parse_duration(f"{text}{unit[0]}") == float(f"{text}{exponent or 'e0'}")


def test_overhead_given_as_a_duration_equals_the_same_number(tmp_path):
    from compensate.cli import main
    case = Path(__file__).parent / "cases" / "r2_m1_a1.trace"
    for i, overhead in enumerate(("100ns", "1e-7")):
        assert main([str(case), str(tmp_path / f"o{i}.trace"), "--overhead", overhead,
                     "--quiet", "--summary", str(tmp_path / f"s{i}.json")]) == 0
    assert (tmp_path / "o0.trace").read_bytes() == (tmp_path / "o1.trace").read_bytes()
    s0, s1 = (json.loads((tmp_path / f"s{i}.json").read_text()) for i in (0, 1))
    assert s0["overcompensated_records"] == s1["overcompensated_records"] == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e4, 1e5), min_size=1, max_size=30),
       st.lists(st.integers(0, 3), min_size=30, max_size=30),
       st.lists(st.tuples(st.floats(1, 5e3), st.floats(0, 2e3)), min_size=1, max_size=6))
def test_cold_charge_never_exceeds_a_gap(gaps, kinds, steps):
    """Platform.cold_charge (issue #22, cold22): 0 <= charge <= the gap R1 left,
    only at an Enter with a curve, zero for a gap <= 0 and without a curve."""
    gap = np.array(gaps)
    n = len(gap)
    kind = np.array(kinds[:n]) % 2  # Enter 0, Leave 1
    region = np.array(kinds[:n]) // 2  # region 1 has a curve, 0 not
    w, e = [0.0], [0.0]
    for dw, de in steps:  # increasing w, non-decreasing extra (ticks = ns)
        w.append(w[-1] + dw)
        e.append(e[-1] + de)
    plat = Platform(0.0, cold={0: ([x * 1e-9 for x in w], {1: [x * 1e-9 for x in e]})})
    c = plat.cold_charge(0, kind, region, gap, 1e9)
    assert np.all(c >= 0) and np.all(c <= np.maximum(gap, 0) + 1e-9)
    assert np.all(c[(kind != 0) | (region != 1) | (gap <= 0)] == 0)
    assert np.all(c <= e[-1] + 1e-6)  # never more than the curve's largest extra
    assert not Platform(0.0).cold_charge(0, kind, region, gap, 1e9).any()
    assert not plat.cold_charge(1, kind, region, gap, 1e9).any()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(-1, 5000)),
                min_size=1, max_size=30))
def test_own_overheads_replace_the_table_only_where_given(records):
    """Property: with an in-situ table for the location, a record's ``overhead``
    column value (ns, >= 0) is its overhead and NONE (-1) leaves the table's;
    without a table (``--platform``/``--overhead`` chosen) the column is ignored."""
    kinds = np.array([k for k, _ in records], dtype=np.int16)  # Enter, Leave, MpiSend
    own = np.array([o for _, o in records], dtype=np.int32)
    regions = np.zeros(len(records), dtype=np.int32)
    table = {"Enter": 100e-9, "Leave": 200e-9, "MpiSend": 300e-9}
    plat = Platform(5e-7, {}, by_location={0: (table, {})})
    got = plat.location_overheads(0, kinds, regions, own)
    base = plat.location_overheads(0, kinds, regions)
    assert np.allclose(got, np.where(own >= 0, own * 1e-9, base))
    assert np.allclose(base, [table[KIND_NAMES[k]] for k in kinds])
    plain = Platform(5e-7, {})
    assert np.allclose(plain.location_overheads(0, kinds, regions, own),
                       plain.location_overheads(0, kinds, regions))


# -- bounds: what a machine can be (docs/platform-file.md, "Bounds") ---------------------

BEYOND = [  # (file content, the path and bound its message names)
    (with_(event_overhead=1e300), "event_overhead: must be <= 3600, got 1e+300"),
    (with_(event_overhead=3601), "event_overhead: must be <= 3600, got 3601"),
    (with_(event_overhead_by_kind={"Enter": 1e300}),
     "event_overhead_by_kind.Enter: must be <= 3600, got 1e+300"),
    (with_(device_overhead=7200.0), "device_overhead: must be <= 3600, got 7200.0"),
    (with_(copy_time=[{"bytes": 64, "seconds": 1e300}]),
     "copy_time[0].seconds: must be <= 3600, got 1e+300"),
    (with_(copy_time=[{"bytes": 10 ** 40, "seconds": 1.0}]),
     "copy_time[0].bytes: must be <= 9007199254740992, got 100000000000... (41 digits)"),
    (with_(copy_time=[{"bytes": 64, "seconds": 1e-8}, {"bytes": 100, "seconds": 101.0}]),
     "copy_time[1].seconds: 101.0 s to copy 100 bytes is slower than 1 byte per second"),
    (with_(network={"latency": 1e300, "per_byte": 1e-9}),
     "network.latency: must be <= 3600, got 1e+300"),
    (with_(network={"latency": 1e-6, "per_byte": 2.0}),
     "network.per_byte: must be <= 1, got 2.0"),
]


@pytest.mark.parametrize("data, message", BEYOND, ids=[m.split(":")[0] for _, m in BEYOND])
def test_values_beyond_a_machine_are_refused_naming_file_path_and_bound(tmp_path, data,
                                                                         message):
    """1e300 s of overhead (or latency, or copy time) passed the schema and
    overflowed in the engine into a run that exited 0 with NaN-cast times."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PlatformError) as exc:
        Platform.load(path)
    text = str(exc.value)
    assert text.startswith(f"{path}: {message}") and "\n" not in text
    assert "docs/platform-file.md" in text
    assert_agree(data)  # jsonschema refuses it too (the maxima are plain JSON Schema)


def test_values_at_the_bounds_are_accepted():
    data = with_(event_overhead=3600, device_overhead=3600.0,
                 copy_time=[{"bytes": 1, "seconds": 1.0}, {"bytes": 2 ** 53, "seconds": 3600}],
                 network={"latency": 3600, "per_byte": 1})
    assert first_problem(data) is None
    assert_agree(data)
    Platform.from_dict(data)


@pytest.mark.parametrize("kwargs, name", [
    ({"event_overhead": 1e300}, "event_overhead"),
    ({"event_overhead": 1e-6, "device_overhead": math.inf}, "device_overhead"),
    ({"event_overhead": 1e-6, "overhead_by_kind": {"Leave": 4000.0}},
     "event_overhead_by_kind['Leave']"),
    ({"event_overhead": 1e-6, "network": (1e-6, 5.0)}, "network.per_byte"),
    ({"event_overhead": 1e-6, "network": (1e300, 0.0)}, "network.latency"),
    ({"event_overhead": 1e-6, "copy_bytes": np.array([64.0]),
      "copy_seconds": np.array([1e300])}, "copy_time"),
])
def test_api_platform_refuses_values_beyond_a_machine(kwargs, name):
    with pytest.raises(PlatformError, match=r"^" + re.escape(name)):
        Platform(**kwargs)


def test_deeply_nested_json_is_one_line(tmp_path):
    """100,000 nested lists: the parser's RecursionError became an internal error."""
    path = tmp_path / "p.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PlatformError) as exc:
        Platform.load(path)
    assert str(exc.value) == f"{path}: not a platform file: JSON nested too deeply"


def test_large_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "p.json"
    with open(path, "wb") as f:
        f.truncate((16 << 20) + 1)  # sparse: costs no disk
    with pytest.raises(PlatformError, match=r"holds 16,777,217 bytes, more than "
                                            r"16,777,216: not a platform file$"):
        Platform.load(path)


LOAD = ("import sys; from compensate.platform import Platform, PlatformError\n"
        "try:\n    Platform.load(sys.argv[1])\nexcept PlatformError as e:\n    print(e)")


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/null"])
def test_special_files_are_refused_at_once(tmp_path, special):
    """A FIFO waited for a writer forever; /dev/zero was read without end. In a
    child process with a deadline and a memory limit, so that the unfixed code
    fails the test instead of hanging it."""
    if special == "fifo":
        path = tmp_path / "p.json"
        os.mkfifo(path)
    else:
        path = tmp_path / "p.json"
        path.symlink_to(special)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True, env=env,
        timeout=60, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30,) * 2))
    kind = "a FIFO (named pipe)" if special == "fifo" else "a character device"
    assert proc.stdout == f"{path}: is {kind}, not a platform file (a regular file)\n"
