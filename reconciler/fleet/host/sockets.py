"""TCP ports something listens on at this host, from Linux's /proc/net/tcp and tcp6, so that
the bot never places a unit on a port another process holds (stdlib only, like every module
of the agent)."""

LISTEN = "0A"  # the kernel's TCP_LISTEN state, in hex


def listening_ports():
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows, None)  # the header
                for row in rows:
                    fields = row.split()
                    if len(fields) > 3 and fields[3] == LISTEN:
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except OSError:
            continue  # not Linux, or no /proc: nothing is known to listen
    return sorted(ports)
