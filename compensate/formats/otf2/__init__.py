"""OTF2 archives: :mod:`~compensate.formats.otf2.read` fills the engine's columns
(:mod:`~compensate.formats.otf2.columns`) and keeps every original record and
definition; :mod:`~compensate.formats.otf2.write` re-emits them with new times
(:mod:`~compensate.formats.otf2.records` builds records a text trace lacks);
:mod:`~compensate.formats.otf2.library` holds what both share;
:mod:`~compensate.formats.otf2.parts` writes one archive from several processes'
parts."""

from compensate.formats.otf2.library import BATCH_EVENTS, Otf2Archive
from compensate.formats.otf2.read import Otf2Chunks, read_otf2, read_otf2_chunks
from compensate.formats.otf2.write import Otf2EventWriter, write_otf2

__all__ = ["BATCH_EVENTS", "Otf2Archive", "Otf2Chunks", "Otf2EventWriter", "read_otf2",
           "read_otf2_chunks", "write_otf2"]
