"""The ``.trace`` text format: one record per line, human-editable
(docs/trace-format.md). :mod:`~compensate.formats.text.read` parses it,
:mod:`~compensate.formats.text.write` writes it,
:mod:`~compensate.formats.text.fastread` parses and formats the frequent record
lines in C, :mod:`~compensate.formats.text.syntax` holds the lexical rules they
share, :mod:`~compensate.formats.text.parts` writes one file from several
processes' parts."""

from compensate.formats.text.read import TextChunks, read_text, read_text_chunks
from compensate.formats.text.syntax import FORMAT_VERSION, MAGIC
from compensate.formats.text.write import MAX_BUFFERED, TextEventWriter, write_text

__all__ = ["FORMAT_VERSION", "MAGIC", "MAX_BUFFERED", "TextChunks", "TextEventWriter",
           "read_text", "read_text_chunks", "write_text"]
