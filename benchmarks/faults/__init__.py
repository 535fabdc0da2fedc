"""The fault campaign's parts (benchmarks/faults.py runs them; docs/faults.md).

``runner`` starts one command and kills its process group on timeout, ``oracles``
decides what a finished run did wrong (each class computed from the files, never
assumed), ``damage`` breaks copies of inputs and builds the larger ones, and
``fam_*`` are the families of runs.
"""
