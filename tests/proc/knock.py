#!/usr/bin/env python3
"""A stranger at cor-run's TCP rendezvous (used by rendezvous.sh).

knock.py HOST PORT SECRET_FILE OLD_SECRET_HEX

Knocks in every way a stranger might, one connection each, while a real session runs:
  scan     connects and closes at once
  garbage  random bytes
  hello    an old session's HELLO, with no proof first
  wrong    a proof made with a secret that is not the session's (OLD_SECRET_HEX: the secret
           of an earlier session)
  replay   a proof that is valid for another connection's challenge (made with the session's
           secret, read from SECRET_FILE, as if captured from a real domain's exchange)
  slow     a proof sent one byte a second (slow-loris): cor-run must cut it off
Each connection must be closed by cor-run, and cor-run must send it nothing but CHALLENGE and
ERR lines (no PROVEN, no WELCOME, no table). Prints one line per knock; exit 0 if all held.
"""
import hashlib
import hmac
import os
import socket
import sys
import time

host, port, secret_file, old_hex = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
failed = 0


def mac(secret, role, nr, nd):
    return hmac.new(secret, b"cor-boot 1 " + role + b"\0" + nr + nd, hashlib.sha256).digest()


def connect():
    s = socket.create_connection((host, port), timeout=15)
    s.settimeout(15)
    return s


def read_line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        c = s.recv(1)
        if not c:
            break
        buf += c
    return buf


def challenge(s):
    line = read_line(s).decode("ascii", "replace").split()
    if len(line) != 3 or line[0] != "CHALLENGE":
        raise RuntimeError("no CHALLENGE: %r" % line)
    return bytes.fromhex(line[2])


def finish(name, s, t0, limit=12.0):
    """Reads until cor-run closes; checks what it said and how long it took."""
    global failed
    got = b""
    try:
        while True:
            c = s.recv(4096)
            if not c:
                break
            got += c
    except (ConnectionResetError, socket.timeout) as e:
        if isinstance(e, socket.timeout):
            print("%s: FAIL: not closed by cor-run" % name)
            failed += 1
            return
    s.close()
    el = time.time() - t0
    bad = [l for l in got.split(b"\n") if l and not l.startswith((b"ERR", b"CHALLENGE"))]
    if bad:
        print("%s: FAIL: cor-run sent %r" % (name, bad[:3]))
        failed += 1
    elif el > limit:
        print("%s: FAIL: closed only after %.1f s" % (name, el))
        failed += 1
    else:
        print("%s: refused and closed after %.1f s%s" % (name, el,
              " (" + got.split(b"\n")[0].decode() + ")" if got.startswith(b"ERR") else ""))


def knock_scan():
    s = connect()
    s.close()
    print("scan: connected and closed")


def knock_garbage():
    s = connect()
    t0 = time.time()
    challenge(s)
    s.sendall(os.urandom(300).replace(b"\n", b"x") + b"\n")
    finish("garbage", s, t0)


def knock_hello():
    s = connect()
    t0 = time.time()
    challenge(s)
    s.sendall(b"HELLO 1 0 2 0123456789abcdef 4242\nADDR 0 udp 0 -\nPUB 1\n")
    finish("hello", s, t0)


def knock_wrong():
    s = connect()
    t0 = time.time()
    nr = challenge(s)
    nd = os.urandom(32)
    s.sendall(b"PROOF %s %s\n" % (nd.hex().encode(), mac(bytes.fromhex(old_hex), b"domain", nr, nd).hex().encode()))
    finish("wrong", s, t0)


def knock_replay():
    with open(secret_file) as f:
        secret = bytes.fromhex(f.read().strip())
    a = connect()
    nr_a = challenge(a)
    nd = os.urandom(32)
    proof = b"PROOF %s %s\n" % (nd.hex().encode(), mac(secret, b"domain", nr_a, nd).hex().encode())
    b = connect()
    t0 = time.time()
    challenge(b)
    b.sendall(proof)  # valid for a's challenge, not b's
    finish("replay", b, t0)
    a.close()


def knock_slow():
    s = connect()
    t0 = time.time()
    challenge(s)
    line = b"PROOF " + b"0" * 64 + b" " + b"1" * 64 + b"\n"
    try:
        for c in line:
            s.sendall(bytes([c]))
            time.sleep(1.0)
            if time.time() - t0 > 20:
                break
    except (BrokenPipeError, ConnectionResetError):
        pass
    finish("slow", s, t0, limit=12.0)


for k in (knock_scan, knock_garbage, knock_hello, knock_wrong, knock_replay, knock_slow):
    try:
        k()
    except Exception as e:  # a knock that could not even be made is a failure of the test
        print("%s: FAIL: %s" % (k.__name__, e))
        failed += 1
sys.exit(1 if failed else 0)
