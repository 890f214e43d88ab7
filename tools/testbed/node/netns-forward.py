#!/usr/bin/env python3
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
"""Forwards TCP from the machine's loopback into a real node's network namespace, so the test process
and the demo (outside it) reach the API server that lives inside. Listens on 127.0.0.1 in the
machine's namespace (never on an outside address), prints the port, then enters the node's
namespace (setns) and relays each connection to TARGET there. Ends when OWNER_PID exits.

    netns-forward.py <node pid> <target host:port>"""
import ctypes
import os
import socket
import sys
import threading
import time

CLONE_NEWNET = 0x40000000


def relay(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(client, target):
    try:
        upstream = socket.create_connection(target, timeout=10)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    threading.Thread(target=relay, args=(client, upstream), daemon=True).start()
    relay(upstream, client)


def main():
    node_pid, target = sys.argv[1], sys.argv[2]
    host, port = target.rsplit(":", 1)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/proc/{node_pid}/ns/net", os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        sys.exit(f"setns: {os.strerror(ctypes.get_errno())}")
    os.close(fd)
    print(listener.getsockname()[1], flush=True)
    sys.stdout.close()
    owner = int(os.environ.get("OWNER_PID", node_pid))

    def watch_owner():
        while True:
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                os._exit(0)
            time.sleep(1)

    threading.Thread(target=watch_owner, daemon=True).start()
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, (host, int(port))), daemon=True).start()


main()
