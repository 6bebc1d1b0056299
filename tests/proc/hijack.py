#!/usr/bin/env python3
"""A stranger in the middle of cor-run's TCP rendezvous (used by sealed.sh).

hijack.py PORT_FILE TARGET_FILE [table]

Listens on 127.0.0.1 (its port written to PORT_FILE) and relays each connection to the
rendezvous whose HOST:PORT is in TARGET_FILE when the connection arrives, line by line, both
ways, untouched: the challenge and the proof go through, so the domain and cor-run prove
themselves to each other. Then it does what someone who can write into a proven TCP stream
would do. Right after the first line of each direction that follows the proof (HELLO up,
WELCOME down, both sealed) it injects three lines:
  - a plain line (no seal): LOST of the other domain up, DEAD of domain 1 down;
  - the same in the seal's shape with a tag it had to make up;
  - a copy of the sealed line it just relayed (a replay).
Each must be dropped and counted: 2 forged and 1 replayed per direction and connection.
With "table" it injects nothing of that, and instead changes the address of the first A line
of the address table (sent as a block: a sealed TABLE with the digest of the A lines, which go
unsealed, then a sealed END) on its way down: the domain must refuse the table whole.
Prints what it injected; runs until killed (the test stops it).
"""
import os
import socket
import sys
import threading

port_file, target_file = sys.argv[1], sys.argv[2]
table_mode = len(sys.argv) > 3 and sys.argv[3] == "table"
say_lock = threading.Lock()  # one whole line at a time from the relays' threads


def injected(first, up):
    if up:
        words = first.split()  # [@seq tag] HELLO 1 rank size session pid
        rank = words[words.index(b"HELLO") + 2] if b"HELLO" in words[:3] else b"1"
        other = b"1" if rank == b"0" else b"0"
        plain = b"LOST " + other
    else:
        plain = b"DEAD 1 forged by a stranger in the middle"
    made_up = b"@2 " + os.urandom(16).hex().encode() + b" " + plain
    return [plain + b"\n", made_up + b"\n", first]


def relay(src, dst, up, name):
    buf = b""
    done = False
    proven = False  # the proof went by: the next line is the first one after it
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                line += b"\n"
                if table_mode and not up and not done and line.startswith(b"A "):
                    done = True  # another peer address (127.0.0.1:9) for the first entry
                    words = line.split()
                    line = b" ".join(words[:5] + [b"3132372e302e302e313a39"]) + b"\n"
                    with say_lock:
                        sys.stdout.write("%s down: changed the table's first address\n" % name)
                        sys.stdout.flush()
                dst.sendall(line)
                if table_mode:
                    continue
                if not proven:
                    proven = line.startswith(b"PROOF " if up else b"PROVEN ")
                elif not done:
                    done = True
                    for extra in injected(line, up):
                        dst.sendall(extra)
                    word = [w for w in line.split() if w.isalpha()][0].decode()
                    with say_lock:
                        sys.stdout.write("%s %s: injected 2 forged lines and replayed '%s'\n" %
                                         (name, "up" if up else "down", word))
                        sys.stdout.flush()
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(conn, n):
    with open(target_file) as f:
        target = f.read().strip()
    host, port = target.rsplit(":", 1)
    up = socket.create_connection((host, int(port)), timeout=30)
    up.settimeout(None)
    name = "connection %d" % n
    threading.Thread(target=relay, args=(conn, up, True, name), daemon=True).start()
    threading.Thread(target=relay, args=(up, conn, False, name), daemon=True).start()


ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
n = 0
while n < 64:  # bounded: a test has a few domains
    conn, _ = ls.accept()
    n += 1
    serve(conn, n)
