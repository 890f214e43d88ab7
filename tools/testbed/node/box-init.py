#!/usr/bin/env python3
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
"""PID 1 of a real node's PID namespace (tools/testbed/node-up.sh): reaps every orphan the node's
daemons leave (containerd shims double-fork) and ends on SIGTERM or SIGINT. When it ends, the kernel
kills every process of the namespace: nothing the node started can outlive it."""
import os
import signal
import sys


def stop(_signum, _frame):
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
while True:
    try:
        os.wait()
    except ChildProcessError:
        signal.pause()
