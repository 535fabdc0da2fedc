"""Test scaffolding: a location's records built row by row (:class:`RowBuilder`),
for the tests' hand-made and random traces. The product builds its columns
directly (the readers, the simulator), so this lives with the tests."""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from compensate.model import NONE, RECORD_COLUMNS, Events


class RowBuilder:
    """Accumulates one location's records row by row, then freezes to :class:`Events`.

    Rows are stored compactly (one ``array('q')`` of the ten column values per row,
    payloads in a dict by row index, since most rows have none): about 80 bytes a
    record instead of a Python tuple of ten ints (~200 bytes), so that building a
    long trace takes memory linear and small in its length.
    """

    __slots__ = ("_cols", "_payload")

    def __init__(self) -> None:
        self._cols = array("q")
        self._payload: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._cols) // len(RECORD_COLUMNS)

    def add(
        self,
        time: int,
        kind: int,
        *,
        region: int = NONE,
        peer: int = NONE,
        comm: int = NONE,
        tag: int = NONE,
        size: int = NONE,
        size_recv: int = NONE,
        op: int = NONE,
        request: int = NONE,
        payload: Any = None,
    ) -> None:
        if payload is not None:
            self._payload[len(self)] = payload
        self._cols.extend((time, kind, region, peer, comm, tag, size, size_recv, op, request))

    def build(self) -> Events:
        """The records as :class:`Events` (copies: the builder may go on)."""
        n = len(self)
        table = np.frombuffer(self._cols, dtype=np.int64).reshape(n, len(RECORD_COLUMNS)) \
            if n else np.zeros((0, len(RECORD_COLUMNS)), dtype=np.int64)
        cols = {name: np.array(table[:, j], dtype=dtype)
                for j, (name, dtype) in enumerate(RECORD_COLUMNS)}
        payload: list[Any] = [None] * n
        for i, p in self._payload.items():
            payload[i] = p
        return Events(**cols, payload=payload)
