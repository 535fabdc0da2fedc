"""The platform file ``python -m calibration.record`` writes beside its trace: the
tracer's per-record cost measured on rank 0, attributed per kind from the in-situ
tables, and the network and RMA entries measured after the program where steady."""

from __future__ import annotations

import argparse
from typing import Any

from calibration.spread import MAX_SPREAD
from calibration.tracer.messages import say


def network_and_rma(platform: dict, pingpong: list[dict] | None, unlock: dict | None,
                     mpi: str, hosts: list[str], max_spread: float = MAX_SPREAD) -> None:
    """Add the ``network`` and ``rma`` entries measured after the program, each only
    where it is steady (:func:`calibration.network.unsteady`,
    :func:`calibration.rma.unsteady`; ``max_spread`` for the network): a noisy one
    is left out with a warning, and
    compensate falls back as without it (the trace's own message times for the
    network; an eager release)."""
    if pingpong:
        from calibration.network import network_entry
        from calibration.network import unsteady as network_unsteady
        from compensate.platform import Platform
        found = network_unsteady(pingpong, max_spread)
        if found is None:
            copy = Platform.from_dict(platform).copy_time
            platform["network"] = {**network_entry(pingpong, copy), "mpi": mpi,
                                   "ranks": hosts}
        else:
            say(found.message("calibration.record", "warning",
                              "platform.json has no network entry"))
    if unlock:
        from calibration.rma import rma_entry
        from calibration.rma import unsteady as rma_unsteady
        found = rma_unsteady(unlock)
        if found is None:
            platform["rma"] = {**rma_entry(unlock), "mpi": mpi}
        else:
            say(found.message("calibration.record", "warning",
                              "platform.json has no rma entry"))


def attribute(platform: dict, tables: list[dict], gathered: list) -> None:
    """Make ``platform`` describe the trace just written: its per-kind O with the
    in-situ tables' stamps-first attribution, capped by the trace's bounds
    (:mod:`calibration.tracer.attribution`), and ``prefer_insitu`` so that
    ``compensate --platform`` uses the trace's own tables where it has them."""
    from calibration.tracer.attribution import stamps_first, trace_bounds

    by_kind, note = stamps_first(platform["event_overhead_by_kind"], tables,
                                 trace_bounds(gathered))
    platform["event_overhead_by_kind"] = by_kind
    platform["prefer_insitu"] = True
    platform["calibration"]["attribution"] = {
        "rule": "stamps first: per kind the median over locations of the in-situ "
                "tables' value, capped by the trace's smallest gap after such a "
                "record; kinds absent from the trace keep the record-path cost "
                "(calibration/tracer/attribution.py)",
        "by_kind": note}


def calibrate(args: argparse.Namespace, status: Any, extra: dict, threaded: bool) -> dict:
    """Rank 0 calibrates for all ranks: the multi-threaded decorator path if any
    rank started threads (one O per kind in a platform file)."""
    from calibration.tracer.overhead import calibrate

    return calibrate(n=args.calibration_records, status=status, extra=extra,
                     threaded=threaded)
