#!/usr/bin/env python3
"""A crowd at cor-run's TCP rendezvous (used by rendezvous.sh).

crowd.py HOST PORT N READY_FILE STOP_FILE SECONDS

Holds N connections that never say anything, opening a new one whenever cor-run closes one,
touches READY_FILE once the N are open, and stops when STOP_FILE appears or after SECONDS.
Prints how many connections it opened in all and how many cor-run closed.
"""
import os
import select
import socket
import sys
import time

host, port, n, ready, stop, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    sys.argv[4], sys.argv[5], float(sys.argv[6])
socks, opened, closed = [], 0, 0


def connect():
    global opened
    s = socket.create_connection((host, port), timeout=5)
    s.setblocking(False)
    opened += 1
    return s


for _ in range(n):
    socks.append(connect())
open(ready, "w").close()
end = time.time() + secs
while time.time() < end and not os.path.exists(stop):
    r, _, _ = select.select(socks, [], [], 0.1)
    for s in r:
        try:
            data = s.recv(4096)
        except (ConnectionResetError, BlockingIOError):
            data = b"" if not isinstance(sys.exc_info()[1], BlockingIOError) else None
        if data == b"":
            closed += 1
            socks.remove(s)
            s.close()
            try:
                socks.append(connect())
            except OSError:  # cor-run is gone: the session is over
                end = 0
                break
print("crowd: opened %d connections, cor-run closed %d" % (opened, closed))
