"""The partitioned wait states (:mod:`compensate.analysis.partitioned`) on the
hand-computed case tests/cases/r11_partitioned.trace (times in ns)."""

import pytest

from compensate.analysis import wait_states
from compensate.formats.text import read_text

from ..conftest import CASES


def test_partitioned_late_sender_and_receiver():
    t = read_text(CASES / "r11_partitioned.trace")
    w = wait_states(t)
    # MPI_Parrived entered at 900, its partition's MPI_Pready at 1000: 100 ns; MPI_Wait
    # entered at 2000, the last Pready it observes (partition 2) at 5000: 3000 ns
    assert sorted(x[2] for x in w.instances["partitioned_late_sender"]) == \
        pytest.approx([100e-9, 3000e-9])
    assert w.by_location["partitioned_late_sender"][1] == pytest.approx(3100e-9)
    # the send's MPI_Wait (5350) began long after the receiver's MPI_Start (300)
    assert w.count("partitioned_late_receiver") == 0


def test_partitioned_late_receiver(tmp_path):
    """The sender completes (enters MPI_Wait at 100) before the receiver starts its
    round (MPI_Start entered at 400): it waits 300 ns."""
    p = tmp_path / "lr.trace"
    p.write_text("""compensate-trace 1
timer_resolution 1000000000
location 0
location 1
region 0 "MPI_Start"
region 1 "MPI_Pready"
region 2 "MPI_Wait"
comm 0 "W" 0,1
events
0 0 MpiPsendInit receiver=1 comm=0 tag=0 bytes=8 partitions=1 request=1
0 1 MpiPrecvInit sender=0 comm=0 tag=0 bytes=8 partitions=1 request=1
10 0 Enter region=0
20 0 MpiPsendRequest request=1
30 0 Leave region=0
40 0 Enter region=1
50 0 MpiPready request=1 partition=0
60 0 Leave region=1
100 0 Enter region=2
500 0 MpiPsendComplete request=1
510 0 Leave region=2
400 1 Enter region=0
410 1 MpiPrecvRequest request=1
420 1 Leave region=0
430 1 Enter region=2
600 1 MpiPrecvComplete request=1
610 1 Leave region=2
""")
    w = wait_states(read_text(p))
    assert w.instances["partitioned_late_receiver"] == [(0, pytest.approx(100e-9),
                                                         pytest.approx(300e-9))]
    assert w.count("partitioned_late_sender") == 0  # the Pready came before the Wait
