"""The shape of MPI one-sided (RMA) records in both formats (R10).

RMA records stay payload-carried kinds of the model (their fields are not numpy
columns: they are few, and only matching reads them). Their payload is an OTF2
event object (OTF2 input through the ``otf2`` package), the normalised fields the
OTF2 C path hands over, or the ``key=value`` strings of a ``.trace`` line;
:func:`compensate.formats.fields.fields_of` turns each into one normalised dict,
:func:`compensate.formats.text.syntax.text_fields` writes it as text fields and
:func:`compensate.formats.otf2.records.otf2_event` builds the OTF2 event from it
for a trace that did not come from OTF2. This module holds what all of them
share: the fields of each kind, under their text names and their ``otf2``
attribute names, and which windows' records R10 reads (:func:`mpi_windows`).

Fields by kind (text names; docs/trace-format.md "RMA records"):

=========================================  ====================================================
kind                                       fields
=========================================  ====================================================
RmaWinCreate, RmaWinDestroy, RmaWaitChange ``win``
RmaCollectiveBegin                         none
RmaCollectiveEnd                           ``op sync_level win root sent received``
RmaGroupSync                               ``sync_level win members`` (location ids)
RmaRequestLock, RmaAcquireLock, RmaTryLock ``win remote lock_id lock_type``
RmaReleaseLock                             ``win remote lock_id``
RmaSync                                    ``win remote sync_type``
RmaPut, RmaGet                             ``win remote bytes matching_id``
RmaAtomic                                  ``win remote type sent received matching_id``
RmaOpComplete*, RmaOpTest                  ``win matching_id``
=========================================  ====================================================

Normalised values: ``win`` the window id; ``remote`` and ``root`` ranks in the
window's communicator, -1 for OTF2's undefined value (Score-P's "all target ranks"
of MPI_Win_lock_all); byte counts and ids ints (-1 undefined); ``lock_type``
``EXCLUSIVE``/``SHARED``; ``sync_level`` the OTF2 bit set as an int (PROCESS = 1,
MEMORY = 2; text: ``NONE``, ``PROCESS``, ``MEMORY`` or ``PROCESS|MEMORY``);
``op`` a collective operation name; ``members`` a tuple of location ids.
"""

from __future__ import annotations

from typing import Any

from compensate.model import KIND_CODE

_WIN = ("win",)
_LOCK = ("win", "remote", "lock_id", "lock_type")
_XFER = ("win", "remote", "bytes", "matching_id")
_OP = ("win", "matching_id")
#: text field names of each RMA record kind, in writing order
RMA_FIELDS: dict[str, tuple[str, ...]] = {
    "RmaWinCreate": _WIN, "RmaWinDestroy": _WIN, "RmaWaitChange": _WIN,
    "RmaCollectiveBegin": (),
    "RmaCollectiveEnd": ("op", "sync_level", "win", "root", "sent", "received"),
    "RmaGroupSync": ("sync_level", "win", "members"),
    "RmaRequestLock": _LOCK, "RmaAcquireLock": _LOCK, "RmaTryLock": _LOCK,
    "RmaReleaseLock": ("win", "remote", "lock_id"),
    "RmaSync": ("win", "remote", "sync_type"),
    "RmaPut": _XFER, "RmaGet": _XFER,
    "RmaAtomic": ("win", "remote", "type", "sent", "received", "matching_id"),
    "RmaOpCompleteBlocking": _OP, "RmaOpCompleteNonBlocking": _OP,
    "RmaOpCompleteRemote": _OP, "RmaOpTest": _OP,
}
#: the model kind codes of the RMA records
RMA_KINDS = frozenset(KIND_CODE[k] for k in RMA_FIELDS)

#: text name -> attribute of the ``otf2`` event object, where they differ
OTF2_NAME: dict[str, str] = {"op": "collective_op", "sent": "bytes_sent",
                             "received": "bytes_received", "members": "group"}
#: OTF2's undefined 32- and 64-bit values (a rank, a byte count, an id)
UINT32_UNDEF, UINT64_UNDEF = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
#: the bits of ``sync_level``
SYNC_PROCESS, SYNC_MEMORY = 1, 2


def mpi_windows(defs: Any) -> set[int]:
    """The windows R10 applies to: MPI windows, whose communicator's members are all
    CPU threads (the MPI ranks). A window with a member on an accelerator stream
    holds device copies that Score-P records as RMA (CUDA, HIP, offload): left to
    the accelerator rules and carried as local records."""
    out = set()
    for wid, win in defs.windows.items():
        comm = defs.comms.get(win.comm)
        members = comm.members if comm is not None else ()
        if members and all(m in defs.locations and defs.locations[m].is_cpu
                           for m in members):
            out.add(wid)
    return out


__all__ = ["OTF2_NAME", "RMA_FIELDS", "RMA_KINDS", "SYNC_MEMORY", "SYNC_PROCESS",
           "UINT32_UNDEF", "UINT64_UNDEF", "mpi_windows"]
