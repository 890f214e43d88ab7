#!/usr/bin/env python3
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
"""Holds N loopback ports for servers the test bed is about to start; prints them on one line.

Binding port 0 and closing the socket leaves a window in which another process can take the port
before the server binds it. Here each port stays bound (not listening, SO_REUSEADDR) until this
process ends: the kernel hands it to no one else, while a server that sets SO_REUSEADDR on its
listener (Go's net package does, so etcd and the Kubernetes components do) binds it normally.
The holder ends on SIGTERM, when its stdin closes, or after --seconds as a last resort.

    hold-ports.py N [--seconds S]
"""
import argparse
import select
import signal
import socket
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("count", type=int)
    parser.add_argument("--seconds", type=float, default=600)
    args = parser.parse_args()
    held = []
    for _ in range(args.count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        held.append(s)
    print(" ".join(str(s.getsockname()[1]) for s in held), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Wait for stdin to close (or any input), or for the time limit.
    select.select([sys.stdin], [], [], args.seconds)


if __name__ == "__main__":
    main()
