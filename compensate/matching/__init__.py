"""Matching: link the records that depend on each other across locations
(docs/design.md §4) -- messages (:mod:`~compensate.matching.p2p`), collective
instances (:mod:`~compensate.matching.collectives`) and the MPI call around each
(:mod:`~compensate.matching.match`)."""

from compensate.matching.collectives import COLLECTIVE_CLASSES, Instance, needed_members
from compensate.matching.match import Matching, Nesting, check_structure, match, nesting
from compensate.matching.p2p import Message, MessageTable

__all__ = ["COLLECTIVE_CLASSES", "Instance", "Matching", "Message", "MessageTable",
           "Nesting", "check_structure", "match", "needed_members", "nesting"]
