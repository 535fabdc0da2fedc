"""Matching: link the records that depend on each other across locations
(docs/design.md §4) -- messages (:mod:`~compensate.matching.p2p`), collective
instances (:mod:`~compensate.matching.collectives`) and the MPI call around each
(:mod:`~compensate.matching.match`)."""

from compensate.matching.collectives import (
    COLLECTIVE_CLASSES,
    EXSCAN,
    N_TO_N,
    N_TO_ONE,
    ONE_TO_N,
    SCAN,
    Instance,
    collective_class,
    needed_members,
)
from compensate.matching.match import Matching, check_structure, match
from compensate.matching.p2p import Message, MessageTable

__all__ = ["COLLECTIVE_CLASSES", "EXSCAN", "N_TO_N", "N_TO_ONE", "ONE_TO_N", "SCAN", "Instance",
           "Matching", "Message", "MessageTable", "check_structure", "collective_class", "match",
           "needed_members"]
