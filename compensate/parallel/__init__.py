"""The distributed run (issue #21, docs/parallel.md): one trace compensated by
several ranks (``mpiexec -n P compensate IN OUT``), output identical to one process.

* :mod:`compensate.parallel.ownership`: which rank owns which locations;
* :mod:`compensate.parallel.transport`: the collective operations (mpi4py, or
  threads of one process for tests);
* :mod:`compensate.parallel.ghosts`: the other ranks' locations a rank holds;
* :mod:`compensate.parallel.trim`: which of their records (the calls its rules
  read) and the index map to their original records;
* :mod:`compensate.parallel.exchange`: the forward replay's exchange of values;
* :mod:`compensate.parallel.driver`: one rank's pipeline and its failure protocol.
"""
