"""Verification: check happened-before order on every output, independently of the
engine (docs/design.md R7)."""

from compensate.verify.checks import Verification, verify

__all__ = ["Verification", "verify"]
