#!/usr/bin/env python3
"""Fires a stranger's datagrams at a CoR domain's udp port (proc/badinput.sh).

usage: garbage.py ADDRFILE COUNT SEED
ADDRFILE holds "ADDR ip:port" and "SESSION <16 hex>" lines (exchange -a). Sends COUNT
datagrams of these kinds, round-robin: random bytes (0..1500 B, and one of 65507 B), a well
formed header with a wrong cookie, wrong magic, wrong version, truncated headers, and, with
the right cookie, absurd lengths (len disagreeing with the datagram, frame_len far beyond any
frame, fragment past its frame) and an unknown source rank. None of them may be accepted.
Prints "sent N" on stdout.
"""
import random
import socket
import struct
import sys
import time

MAGIC = 0x75526F43
HDR = struct.Struct("<IBBHQIIIQIIIIII")  # the 60-byte header of cor/routes/udp/udp_wire.h
assert HDR.size == 60


def header(cookie, src=1, dst=0, typ=1, flags=0, seq=1, frame_len=16, frag_off=0, length=16,
           magic=MAGIC, version=1):
    return HDR.pack(magic, version, typ, flags, cookie, src, dst, 0, 0, seq, frame_len,
                    frag_off, length, 0, 0)


def kinds(cookie, rnd):
    wrong = cookie ^ (rnd.getrandbits(63) | 1)
    body = bytes(16)
    yield "random", bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 1500)))
    yield "wrong-cookie", header(wrong) + body
    yield "wrong-magic", header(cookie, magic=0xDEADBEEF) + body
    yield "wrong-version", header(cookie, version=77) + body
    yield "truncated", header(cookie)[: rnd.randrange(0, HDR.size)]
    yield "len-mismatch", header(cookie, length=0xFFFFFFF0) + body
    yield "huge-frame", header(cookie, frame_len=0xFFFFFFFF, length=16) + body
    yield "frag-past-frame", header(cookie, frame_len=16, frag_off=0x7FFFFFFF) + body
    yield "unknown-source", header(cookie, src=4000, frame_len=16) + body
    yield "bad-type", header(cookie, typ=9) + body


def main():
    addrfile, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    info = dict(line.split(None, 1) for line in open(addrfile).read().splitlines() if " " in line)
    host, port = info["ADDR"].strip().rsplit(":", 1)
    cookie = int(info["SESSION"].strip(), 16)
    rnd = random.Random(seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = 0
    big = bytes(rnd.getrandbits(8) for _ in range(65507))
    sock.sendto(big, (host, int(port)))
    sent += 1
    while sent < count:
        for _, dgram in kinds(cookie, rnd):
            if sent >= count:
                break
            sock.sendto(dgram, (host, int(port)))
            sent += 1
            if sent % 50 == 0:
                time.sleep(0.002)  # pace: kernel drops would not be counted by the route
    print("sent", sent)


if __name__ == "__main__":
    main()
