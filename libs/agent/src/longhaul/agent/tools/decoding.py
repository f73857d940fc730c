"""Content-Encoding decoding with a bound on what it produces.

httpx decodes each network chunk whole: a few kilobytes of gzip (or zstd, where `zstandard`
is installed) inflate to hundreds of megabytes inside one ``decompress`` call, before any size
cap can look at them (a decompression bomb). Here every step is given ``max_length``, so
decoding stops at the cap whatever the ratio; only the encodings this module can bound are
asked for (``ACCEPT_ENCODING``) and any other one is refused.
"""

from __future__ import annotations

import zlib

from longhaul.agent.errors import ToolError

ACCEPT_ENCODING = "gzip, deflate"


class _Inflate:
    """One zlib layer (gzip or deflate); deflate may come with or without its zlib header."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding in {"gzip", "x-gzip"}
        self._inflater = zlib.decompressobj(zlib.MAX_WBITS | 16 if self._gzip else zlib.MAX_WBITS)
        self._first = True

    def decode(self, data: bytes, limit: int) -> bytes:
        if self._first and not self._gzip:
            self._first = False
            try:
                return self._bounded(data, limit)
            except zlib.error:  # raw deflate, as some servers send it
                self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        self._first = False
        return self._bounded(data, limit)

    def _bounded(self, data: bytes, limit: int) -> bytes:
        out = bytearray(self._inflater.decompress(data, limit))
        while self._inflater.unconsumed_tail and len(out) < limit:
            out += self._inflater.decompress(self._inflater.unconsumed_tail, limit - len(out))
        return bytes(out)


class BoundedDecoder:
    """Decodes a body's ``Content-Encoding`` layers and produces at most ``limit`` bytes;
    ``cut`` tells that more would have come."""

    def __init__(self, content_encoding: str, limit: int) -> None:
        names = [n.strip().lower() for n in content_encoding.split(",") if n.strip()]
        layers = [n for n in reversed(names) if n != "identity"]
        unknown = [n for n in layers if n not in {"gzip", "x-gzip", "deflate"}]
        if unknown:
            raise ToolError(
                f"the server sent Content-Encoding {content_encoding!r}, which was not asked "
                f"for (only {ACCEPT_ENCODING})",
                code="fetch_failed",
            )
        self._layers = [_Inflate(name) for name in layers]
        self._limit = limit
        self.produced = 0
        self.cut = False

    def feed(self, data: bytes) -> bytes:
        """The decoded bytes of ``data``, no more than what is left under the limit."""
        room = self._limit - self.produced
        for layer in self._layers:
            try:
                data = layer.decode(data, room + 1)
            except zlib.error as exc:
                raise ToolError(f"the body does not decode: {exc}", code="fetch_failed") from exc
        if len(data) > room:
            data, self.cut = data[:room], True
        self.produced += len(data)
        return data
