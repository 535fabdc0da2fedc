"""compensate: remove tracing overhead from MPI event traces.

Read a measured trace (OTF2 or the `.trace` text format), subtract the per-record
tracer overhead, re-time communication with the lower- or upper-bound model of
Wolf, Malony, Shende and Morris, check happened-before order, and write an
approximation of the uninstrumented run. See README.md and docs/.
"""

__version__ = "0.1.0"
