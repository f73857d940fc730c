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


# Forms that carry an IPv4 address inside an IPv6 one: a gateway or the kernel may unwrap them.
NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT; holds cloud metadata addresses

# IANA's special-purpose registries (IPv4 and IPv6), the blocks that are not globally
# reachable, written out: ``is_global``/``is_private`` follow the tables of the running Python,
# and older ones miss some (3.11.7 calls 192.0.0.192, in the IETF protocol block, global).
SPECIAL_PURPOSE = tuple(
    ipaddress.ip_network(block)
    for block in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "64:ff9b:1::/48",
        "100::/64",
        "100:0:0:1::/64",
        "2001::/23",
        "2001:db8::/32",
        "3fff::/20",
        "5f00::/16",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a mapped, 6to4, Teredo or NAT64 address reaches, if it is one."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in net for net in NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refused_reason(address: IPAddress) -> str | None:
    """Why ``address`` is not a global unicast address, or ``None`` if it is.

    The IANA special-purpose blocks are refused by their own list (the running Python's
    ``is_global`` is a second net), the named checks make the refusal readable. Embedded IPv4
    forms are judged by what they reach.
    """
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            return refused_reason(inner)
    checks = (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("shared (100.64.0.0/10)", address in SHARED),
        ("private", address.is_private),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("reserved", address.is_reserved),
        ("special-purpose", any(address in block for block in SPECIAL_PURPOSE)),
        ("non-global", not address.is_global),
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
