#!/usr/bin/env python3
"""A stand-in for cor-run that reports a death while the domain finalizes (latedeath.sh).

latedeath.py SOCKET_PATH PROGRAM [ARGS...]

Listens on SOCKET_PATH, starts PROGRAM as domain 0 of a session of 2 and plays cor-run's
side of the bootstrap lines (cor/core/bootline.h) for it: WELCOME, the address table (domain
1 is a made-up address nobody answers at), RELEASE for each barrier. When the domain says
FINISH, it first sends "DEAD 1" and only half a second later BYE: the death notice reaches
the domain after cor_finalize freed its state. The domain must ignore it and end normally.
Prints the domain's exit status; exit 0 only if it exited 0 (not killed by a signal).
"""
import os
import socket
import subprocess
import sys
import time

path, prog = sys.argv[1], sys.argv[2:]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
os.chmod(path, 0o600)
srv.listen(1)
srv.settimeout(60)
env = dict(os.environ, COR_BOOT=path, COR_RANK="0", COR_SIZE="2",
           COR_SESSION="0123456789abcdef")
child = subprocess.Popen(prog, env=env)
ok = True


def fail(why):
    print("latedeath.py: FAIL: " + why, flush=True)
    child.kill()
    child.wait()
    sys.exit(1)


try:
    conn, _ = srv.accept()
except socket.timeout:
    fail("the domain did not connect within 60 s")
conn.settimeout(60)
buf = b""


def lines():
    global buf
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line.decode("ascii", "replace").split(" ")
        try:
            chunk = conn.recv(4096)
        except socket.timeout:
            fail("the domain said nothing for 60 s")
        if not chunk:
            return
        buf += chunk


def send(text):
    try:
        conn.sendall(text.encode("ascii") + b"\n")
    except OSError:
        pass  # the domain is gone: its exit status tells why


addrs = {}
peer = "127.0.0.1:9".encode("ascii").hex()  # the discard port: nobody answers there
finished = False
for w in lines():
    if w[0] == "HELLO":
        send("WELCOME")
    elif w[0] == "ADDR":
        addrs[int(w[1])] = (w[2], w[3], w[4])
    elif w[0] == "PUB":
        n = int(w[1])
        send("TABLE 2 %d" % n)
        for k in range(n):
            route, port, hexaddr = addrs[k]
            send("A 0 %d %s %s %s" % (k, route, port, hexaddr))
        for k in range(n):
            route, port, _ = addrs[k]
            send("A 1 %d %s %s %s" % (k, route, port, peer))
        send("END")
    elif w[0] == "BARRIER":
        send("RELEASE " + w[1])
    elif w[0] == "FINISH":
        send("DEAD 1 killed while domain 0 finalized")
        time.sleep(0.5)
        send("BYE")
        finished = True
        break
    else:
        fail("unexpected line %r" % " ".join(w))
try:
    rc = child.wait(timeout=60)
except subprocess.TimeoutExpired:
    fail("the domain did not end within 60 s after BYE")
conn.close()
if not finished:
    fail("the domain never said FINISH (exit status %d)" % rc)
print("latedeath.py: domain 0 exited with status %d" % rc, flush=True)
sys.exit(0 if rc == 0 else 1)
