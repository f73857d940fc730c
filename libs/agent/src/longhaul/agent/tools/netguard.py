"""Which network targets ``webfetch`` may reach.

Server-side request forgery is the classic way an agent with a fetch tool reads a cloud
metadata endpoint or an internal admin page. Every address a host resolves to is checked (a
name with one public and one private address is refused), and the request is then pinned to
the checked address so that a second DNS answer cannot swap in another one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from longhaul.agent.errors import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def refused_reason(address: IPAddress) -> str | None:
    """Why ``address`` is not a public unicast address, or ``None`` if it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return refused_reason(address.ipv4_mapped)
    checks = (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("private", address.is_private),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("reserved", address.is_reserved),
    )
    return next((name for name, hit in checks if hit), None)


async def resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ToolError(f"cannot resolve {host}: {exc}", code="dns_error") from exc
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))


async def checked_addresses(host: str, port: int, *, allow_private: bool) -> list[IPAddress]:
    """The addresses to connect to, in resolver order; raises
    ``ToolError(code="address_refused")`` if any of them is not public."""
    addresses = await resolve(host, port)
    if not addresses:
        raise ToolError(f"{host} has no address", code="dns_error")
    if not allow_private:
        for address in addresses:
            reason = refused_reason(address)
            if reason is not None:
                raise ToolError(
                    f"refused to fetch {host}: it resolves to {address}, a {reason} address",
                    code="address_refused",
                )
    return addresses
