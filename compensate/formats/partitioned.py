"""MPI-4 partitioned point-to-point records in the two formats (issue #20).

The model has one record kind per event of the seed's event model (Thärigen,
Hermanns, Geimer, SC-W 2023; ``MpiPsendInit`` ... ``MpiPrecvComplete`` in
:data:`compensate.model.KIND_NAMES`). The text format carries them as
first-class records; their fields and columns are :data:`TEXT_FIELDS`.

OTF2 3.x has no record kinds for them. Each is written as its own
``ParameterUnsignedInt`` record inside the MPI call it belongs to (between the
call's Enter and Leave, where the seed places its events), in the spirit of the
OTF key-value extension (Knüpfer et al., "A generic attribute extension to OTF
and its use for MPI replay", whose ``NoOp`` record exists only to carry
key-value pairs): the parameter's name says which event it is
(``compensate:MpiPready``), its value is the request id, and OTF2 attributes
carry the call's other arguments (``compensate:partition``, ``compensate:peer``,
``compensate:tag``, ``compensate:communicator``, ``compensate:bytes``,
``compensate:partitions``). Any OTF2 tool opens such an archive (it sees integer
parameters of the MPI call); the reader turns exactly these records back into the
model's kinds. One model record stays one OTF2 record, so its own time and the
tracer overhead it cost survive (attaching the fields to the call's Enter or
Leave would merge two records into one).
"""

from __future__ import annotations

from typing import Any

from compensate.model import (
    KIND_CODE,
    KIND_NAMES,
    NONE,
    PARRIVED,
    PARTITIONED_KINDS,
    PREADY,
    PRECV_COMPLETE,
    PRECV_INIT,
    PRECV_REQUEST,
    PSEND_COMPLETE,
    PSEND_INIT,
    PSEND_REQUEST,
    PTESTED,
)

#: kind -> ((text field, model column), ...) in the order the writer writes them;
#: every field is required
TEXT_FIELDS: dict[int, tuple[tuple[str, str], ...]] = {
    PSEND_INIT: (("receiver", "peer"), ("comm", "comm"), ("tag", "tag"), ("bytes", "size"),
                 ("partitions", "size_recv"), ("request", "request")),
    PRECV_INIT: (("sender", "peer"), ("comm", "comm"), ("tag", "tag"), ("bytes", "size"),
                 ("partitions", "size_recv"), ("request", "request")),
    PSEND_REQUEST: (("request", "request"),),
    PRECV_REQUEST: (("request", "request"),),
    PREADY: (("request", "request"), ("partition", "size_recv")),
    PARRIVED: (("request", "request"), ("partition", "size_recv")),
    PTESTED: (("request", "request"), ("partition", "size_recv")),
    PSEND_COMPLETE: (("request", "request"),),
    PRECV_COMPLETE: (("request", "request"),),
}

#: prefix of the OTF2 parameter and attribute names
PREFIX = "compensate:"
#: model column -> (OTF2 attribute name, description) for the fields other than the
#: request id (which is the parameter's value)
ATTRIBUTES: dict[str, tuple[str, str]] = {
    "peer": (PREFIX + "peer", "MPI partitioned: rank of the peer in the communicator"),
    "comm": (PREFIX + "communicator", "MPI partitioned: communicator"),
    "tag": (PREFIX + "tag", "MPI partitioned: message tag"),
    "size": (PREFIX + "bytes", "MPI partitioned: bytes of the whole buffer"),
    "size_recv": (PREFIX + "partitions", "MPI partitioned: number of partitions"),
}
_PARTITION = (PREFIX + "partition", "MPI partitioned: partition index")


def attribute_of(kind: int, column: str) -> tuple[str, str]:
    """OTF2 attribute (name, description) of ``column`` for ``kind``: ``size_recv``
    is the partition index of Pready/Parrived/Ptested, the partition count of the
    Init records."""
    if column == "size_recv" and kind in (PREADY, PARRIVED, PTESTED):
        return _PARTITION
    return ATTRIBUTES[column]


def parameter_name(kind: int) -> str:
    """The OTF2 parameter name of a partitioned kind (``compensate:MpiPready``)."""
    return PREFIX + KIND_NAMES[kind]


def kind_of_parameter(name: Any) -> int | None:
    """The partitioned kind an OTF2 parameter name stands for, else None."""
    if not isinstance(name, str) or not name.startswith(PREFIX):
        return None
    kind = KIND_CODE.get(name[len(PREFIX):])
    return kind if kind in PARTITIONED_KINDS else None


def columns_of_event(kind: int, event: Any) -> dict[str, int]:
    """Model columns of a partitioned record read from its OTF2
    ``ParameterUnsignedInt`` (missing attributes: -1)."""
    out = {"request": int(event.value)}
    by_name = {getattr(a, "name", None): v for a, v in (event.attributes or {}).items()}
    for _key, column in TEXT_FIELDS[kind]:
        if column == "request":
            continue
        value = by_name.get(attribute_of(kind, column)[0])
        if value is None:
            out[column] = NONE
        elif column == "comm":
            out[column] = int(value._ref)
        else:
            out[column] = int(value)
    return out


def event_from_columns(reg: Any, cols: dict[str, list[int]], i: int, kind: int) -> Any:
    """The OTF2 ``ParameterUnsignedInt`` of partitioned record ``i``; its parameter
    and attribute definitions are added to ``reg`` on first use (an archive read
    from OTF2 already has them: the same definitions are found by name)."""
    fields = {column: cols[column][i] for _key, column in TEXT_FIELDS[kind]}
    comm = reg.comms[fields["comm"]] if "comm" in fields else None
    return make_event(reg, kind, cols["time"][i], fields, comm)


def make_event(reg: Any, kind: int, time: int, fields: dict[str, int], comm: Any = None) -> Any:
    """The OTF2 ``ParameterUnsignedInt`` of a partitioned record of ``kind`` at
    ``time`` with the model columns ``fields`` (``comm``: the communicator's OTF2
    definition, for the Init records); definitions are added to ``reg`` on first
    use."""
    import otf2.events as oev
    from otf2.enums import ParameterType, Type

    param = reg.parameter(parameter_name(kind), parameter_type=ParameterType.UINT64)
    attributes = {}
    for _key, column in TEXT_FIELDS[kind]:
        if column == "request":
            continue
        name, description = attribute_of(kind, column)
        if column == "comm":
            attributes[reg.attribute(name, description, type=Type.COMM)] = comm
        elif column == "peer" or column == "tag":
            attributes[reg.attribute(name, description, type=Type.UINT32)] = int(fields[column])
        else:
            attributes[reg.attribute(name, description, type=Type.UINT64)] = int(fields[column])
    request = int(fields["request"])
    if request < 0:
        raise ValueError("undefined request id")
    return oev.ParameterUnsignedInt(time, param, request, attributes=attributes)
