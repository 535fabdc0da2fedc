"""ColumnSpool (compensate/formats/otf2/spool.py): what pass 2 copies when the
archive is closed comes back as it was handed over, per location and in order,
from a file nobody else sees."""

import os

import numpy as np

from compensate.formats.otf2.spool import ColumnSpool
from compensate.model import BUFFER_FLUSH, ENTER, LEAVE


def _block(rng, n):
    kind = rng.choice(np.array([ENTER, LEAVE, BUFFER_FLUSH], np.int16), n)
    time = np.sort(rng.integers(0, 2**62, n)).astype(np.int64)
    size = rng.integers(-5, 2**40, n)  # read back for the BufferFlush records only
    return time, size, kind


def test_blocks_come_back_per_location_in_order(tmp_path):
    rng = np.random.default_rng(7)
    spool = ColumnSpool(str(tmp_path))
    added = {}
    for ref, n in [(5, 40), (2, 0), (5, 3), (2, 17), (9, 1), (5, 25)]:  # interleaved, one empty
        time, size, kind = _block(rng, n)
        base = sum(len(b[0]) for b in added.get(ref, []))
        spool.add(ref, time, size, kind.astype(np.int64), base)  # any integer kind dtype
        added.setdefault(ref, []).append((time, np.where(kind == BUFFER_FLUSH, size, 0), kind,
                                          base))
    assert spool.locations() == [5, 2, 9]
    for ref in (2, 9, 5):
        got = list(spool.take(ref))
        assert not spool.pending(ref)
        assert len(got) == len(added[ref])
        for (time, size, kind, base), (t, s, k, b) in zip(got, added[ref], strict=True):
            assert time.dtype == np.int64 and kind.dtype == np.int16 and size.dtype == np.int64
            assert np.array_equal(time, t) and np.array_equal(kind, k)
            assert np.array_equal(size, s) and base == b
    assert spool.locations() == [] and list(spool.take(5)) == []
    spool.close()
    spool.close()


def test_the_file_has_no_name_and_goes_with_close(tmp_path):
    """Nothing appears in the output's directory (an interrupted run leaves no file
    behind), and the space is given back on close."""
    spool = ColumnSpool(str(tmp_path))
    time, size, kind = _block(np.random.default_rng(1), 1000)
    spool.add(0, time, size, kind, 0)
    assert os.listdir(tmp_path) == []
    fd = spool._file.fileno()
    assert os.fstat(fd).st_size == 10 * 1000 + 8 * int((kind == BUFFER_FLUSH).sum())
    spool.close()
    assert os.listdir(tmp_path) == []
