"""The cap on remote answers below ``a2a-sdk`` (``remote_agents.<name>.max_response_bytes``),
against a real HTTP server: an answer without a length is read only up to the cap, then
refused; a compressed one is refused unread (its size says nothing); one within the cap is
read whole."""

from __future__ import annotations

import gzip

import httpx
import pytest
from longhaul.domain.config import RemoteAgentConfig
from longhaul.executor.capped_http import IDENTITY, AnswerRefused, CappedTransport
from longhaul.executor.remote import RemoteAgents
from longhaul.executor.remote_status import RemoteError, remote_id

from tests.support.counting_server import JsonHandler, serving

CAP = 64 * 1024


class Answers(JsonHandler):
    """``/stream``: 1 MiB with no length (closed-delimited, as HTTP/1.0); ``/gzip``: a small
    gzip body that would decompress to 1 MiB; ``/small``: within the cap."""

    def do_GET(self) -> None:
        self.send_response(200)
        if self.path == "/small":
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"small")
            return
        if self.path == "/gzip":
            packed = gzip.compress(b"x" * 1024 * 1024)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(packed)))
            self.end_headers()
            self.wfile.write(packed)
            return
        self.end_headers()
        try:
            for _ in range(64):
                self.wfile.write(b"x" * 16 * 1024)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what the cap is for


async def test_an_answer_over_the_cap_or_compressed_is_refused_one_within_is_read() -> None:
    with serving(Answers) as url:
        async with httpx.AsyncClient(
            headers=IDENTITY, transport=CappedTransport(CAP), timeout=10
        ) as client:
            with pytest.raises(AnswerRefused, match=f"answered more than {CAP} bytes"):
                await client.get(f"{url}/stream")
            with pytest.raises(AnswerRefused, match="Content-Encoding 'gzip'"):
                await client.get(f"{url}/gzip")
            assert (await client.get(f"{url}/small")).content == b"small"


class HugeGateway(JsonHandler):
    """A "longhaul gateway" whose trace view is too big: 4 MiB with a length on
    ``/api/traces/t_len``; 64 MiB without one (closed-delimited) on any other trace, far more
    than loopback's socket buffers hold, so only a client that stops reading cuts it short.
    ``streamed`` counts what the length-less answer got out."""

    streamed: list[int] = []

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        chunk = b" " * 64 * 1024
        with_length = self.path.endswith("/t_len")
        chunks = 64 if with_length else 1024
        if with_length:
            self.send_header("Content-Length", str(chunks * len(chunk) + 2))
        self.end_headers()
        try:
            self.wfile.write(b"{")
            for _ in range(chunks):
                self.wfile.write(chunk)
                if not with_length:
                    self.streamed.append(len(chunk))
            self.wfile.write(b"}")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what the cap is for


async def test_a_longhaul_remote_that_answers_too_much_is_not_read() -> None:
    """``remote_agents.<name>.max_response_bytes`` bounds a ``protocol: longhaul`` remote as
    it bounds an A2A one: a status answer over it fails the child (final, not retried) and
    is not read, with a length or without."""
    with serving(HugeGateway) as url:
        config = RemoteAgentConfig(url=url, max_response_bytes=CAP)
        agents = RemoteAgents({"big": config})
        try:
            for trace in ("t_len", "t_stream"):
                with pytest.raises(RemoteError) as refused:
                    await agents.status("big", remote_id(config, trace))
                assert not refused.value.transient
                assert "(remote_agents.big.max_response_bytes): not read" in str(refused.value)
        finally:
            await agents.aclose()
    # the one without a length was cut short: what got out is what the socket buffers hold
    assert sum(HugeGateway.streamed) < 256 * 64 * 1024
