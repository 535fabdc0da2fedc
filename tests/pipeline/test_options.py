"""RunOptions (compensate.pipeline.options) validates its fields for the Python API as
the command's parser does for the command line: a ValueError naming the field."""

import pytest

from compensate.pipeline.options import RunOptions


@pytest.mark.parametrize("field, value", [
    ("eager_limit", -1), ("eager_limit", 2 ** 63), ("eager_limit", 1.5),
    ("eager_limit", True), ("segment_records", 0), ("segment_records", -5),
    ("segment_records", 2 ** 63), ("segment_records", "10"),
])
def test_out_of_range_values_name_the_field(field, value):
    with pytest.raises(ValueError, match=rf"^{field} must be a number of \w+ from "):
        RunOptions(**{field: value})


def test_values_in_range_are_kept():
    opts = RunOptions(eager_limit=0, segment_records=2 ** 63 - 1)
    assert (opts.eager_limit, opts.segment_records) == (0, 2 ** 63 - 1)
    assert RunOptions(eager_limit=None, segment_records=1).segment_records == 1
