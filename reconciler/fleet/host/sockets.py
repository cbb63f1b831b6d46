"""TCP ports something listens on at this host, from Linux's /proc/net/tcp and tcp6, so that
the bot never places a unit on a port another process holds (stdlib only, like every module
of the agent). Ports held only on loopback addresses of their own (127.x.y.z, each a local
fleet's) are also given by address: a unit bound to another address may use them."""

LISTEN = "0A"  # the kernel's TCP_LISTEN state, in hex


def _listeners():
    """(address or None when not a plain IPv4 one, port) of every listening socket."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows, None)  # the header
                for row in rows:
                    fields = row.split()
                    if len(fields) > 3 and fields[3] == LISTEN:
                        address, port = fields[1].rsplit(":", 1)
                        found.append((_ipv4(address) if table.endswith("tcp") else None, port))
        except OSError:
            continue  # not Linux, or no /proc: nothing is known to listen
    return [(address, int(port, 16)) for address, port in found]


def _ipv4(hexed):
    """/proc/net/tcp's little-endian hex of an IPv4 address, dotted; None if it is not one."""
    try:
        return ".".join(str(b) for b in int(hexed, 16).to_bytes(4, "little"))
    except (ValueError, OverflowError):
        return None


def listening_ports():
    return sorted({port for _, port in _listeners()})


def loopback_only():
    """address -> ports, for the ports whose every listener is bound to a 127.0.0.0/8
    address (not a wildcard, not another interface)."""
    by_port = {}
    for address, port in _listeners():
        by_port.setdefault(port, set()).add(address)
    found = {}
    for port, addresses in sorted(by_port.items()):
        if all(a is not None and a.startswith("127.") for a in addresses):
            for address in addresses:
                found.setdefault(address, []).append(port)
    return found
