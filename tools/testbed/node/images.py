#!/usr/bin/env python3
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
"""The real node's images, shaped as werf.yaml's final images (same binaries, paths, libraries and
mount points; the distroless base's users), built from the workspace with oci-image.py:
  - gpu-node-agent, gpu-controller, gpu-dra-controller: the static binary at /app/<name>;
  - gpu-handler: /app/gpu-handler (dynamic) with glibc, /app/gpu-cdi-hook and driver-tool as
    /app/driver-tools/<tool> (static); its mount points;
  - kubeRbacProxy (a common image): /kube-rbac-proxy with Deckhouse's entrypoint;
  - nvidiaValidator: NVIDIA's nvidia-validator with the tools its Pod runs (sh, sleep, test, chroot);
  - the sandbox image registry.k8s.io/pause:3.10, built from the Kubernetes release's pause.c;
  - the test bed's workload image (a userland with sh, ldconfig and glibc, as a CUDA base image has).
Glibc is Debian's (the binaries are built against it), in Debian's directory; werf's images carry
ALT's in /lib64 for ALT's loader.
    images.py <node dir> <static target dir> <dynamic target dir> <out dir>   -> writes images.json"""
import glob
import json
import os
import subprocess
import sys

import yaml

node_dir, static_dir, dynamic_dir, out = sys.argv[1:5]
here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.abspath(os.path.join(here, "../../.."))
env = dict(line.split("=", 1) for line in open(os.path.join(node_dir, "node.env")).read().split())
REGISTRY = "registry.testbed.invalid/deckhouse/modules/gpu"
GLIBC = "/lib/x86_64-linux-gnu"
os.makedirs(out, exist_ok=True)

BASE = {
    "dirs": [["/tmp", 0o1777], ["/app", 0o755]],
    "texts": [
        ["/etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\ndeckhouse:x:64535:64535::/:/sbin/nologin\n"
                        "nobody:x:65534:65534::/:/sbin/nologin\n", 0o644],
        ["/etc/group", "root:x:0:\ndeckhouse:x:64535:\nnobody:x:65534:\n", 0o644],
    ],
}


def build(key, spec):
    tar = os.path.join(out, key + ".tar")
    digest = subprocess.run([sys.executable, os.path.join(here, "oci-image.py"), tar], input=json.dumps(spec),
                            capture_output=True, text=True, check=True).stdout.strip()
    return tar, digest


def merged(*parts):
    spec = {}
    for part in parts:
        for k, v in part.items():
            spec[k] = spec.get(k, []) + v if isinstance(v, list) else v
    return spec


def mount_points(image):
    points = yaml.safe_load(open(os.path.join(repo, "images", image, "mount-points.yaml")))
    return {"dirs": [[d, 0o755] for d in points.get("dirs", [])],
            "texts": [[f, "", 0o644] for f in points.get("files", [])]}


def app(name, binary):
    return {"files": [[binary, "/app/" + name, 0o755]],
            "config": {"Entrypoint": ["/app/" + name], "WorkingDir": "/app", "User": "64535:64535"}}


def glibc(libs):
    files = [[os.path.join(GLIBC, lib), os.path.join(GLIBC, lib), 0o755] for lib in libs]
    files.append([os.path.join(GLIBC, "ld-linux-x86-64.so.2"), "/lib64/ld-linux-x86-64.so.2", 0o755])
    return {"files": files}


images = {}
digests = {"gpu": {}, "common": {}}
for name, key in [("gpu-node-agent", "gpuNodeAgent"), ("gpu-controller", "gpuController"),
                  ("gpu-dra-controller", "gpuDraController")]:
    spec = merged({"repository": REGISTRY}, BASE, app(name, os.path.join(static_dir, name)))
    if os.path.exists(os.path.join(repo, "images", name, "mount-points.yaml")):
        spec = merged(spec, mount_points(name))
    images[key] = build(key, spec)
handler = merged({"repository": REGISTRY}, BASE, app("gpu-handler", os.path.join(dynamic_dir, "gpu-handler")),
                 {"files": [[os.path.join(static_dir, "gpu-cdi-hook"), "/app/gpu-cdi-hook", 0o755]]
                  + [[os.path.join(static_dir, "driver-tool"), "/app/driver-tools/" + tool, 0o755]
                     for tool in ("nvidia-smi", "nvidia-cuda-mps-control")]},
                 mount_points("gpu-handler"),
                 glibc(["libc.so.6", "libm.so.6", "libgcc_s.so.1", "libdl.so.2", "libpthread.so.0"]))
images["gpuHandler"] = build("gpuHandler", handler)
# The next release's gpu-handler: the same image with one more file, so another digest (the real node's
# tests upgrade the module to it: upgrades.gpuHandler).
images["gpuHandlerNext"] = build("gpuHandlerNext", merged(handler, {"texts": [["/app/release", "next\n", 0o644]]}))
for key in ["gpuNodeAgent", "gpuController", "gpuDraController", "gpuHandler"]:
    digests["gpu"][key] = images[key][1]

ciphers = ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,"
           "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,"
           "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256")
krp = glob.glob(os.path.join(os.environ["GPU_CACHE"], "node/kube-rbac-proxy-*/bin/kube-rbac-proxy"))[0]
images["kubeRbacProxy"] = build("kubeRbacProxy", merged({"repository": REGISTRY}, BASE, {
    "files": [[krp, "/kube-rbac-proxy", 0o755]],
    "config": {"Entrypoint": ["/kube-rbac-proxy", "--tls-cipher-suites", ciphers], "User": "64535:64535"}}))
digests["common"]["kubeRbacProxy"] = images["kubeRbacProxy"][1]

BUSYBOX = ["sh", "sleep", "test", "cat", "ls", "echo", "grep", "mount", "readlink", "stat", "sed", "head", "env"]
busybox = {"files": [["/bin/busybox", "/bin/busybox", 0o755]],
           "symlinks": [["/bin/" + tool, "busybox"] for tool in BUSYBOX]}
validator = glob.glob(os.path.join(os.environ["GPU_CACHE"], "node/nvidia-validator-*/bin/nvidia-validator"))[0]
images["nvidiaValidator"] = build("nvidiaValidator", merged({"repository": REGISTRY}, BASE, busybox, {
    "files": [[validator, "/usr/bin/nvidia-validator", 0o755]],
    "symlinks": [["/usr/sbin/chroot", "/bin/busybox"]],
    "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}}))
digests["gpu"]["nvidiaValidator"] = images["nvidiaValidator"][1]

pause = os.path.join(out, "pause")
source = os.path.join(os.popen("go env GOMODCACHE").read().strip(), "k8s.io/kubernetes@" + env["K8S_VERSION"],
                      "build/pause/linux/pause.c")
subprocess.run(["gcc", "-Os", "-static", "-DVERSION=3.10", "-o", pause, source], check=True)
images["pause"] = build("pause", {"name": "registry.k8s.io/pause:3.10", "files": [[pause, "/pause", 0o755]],
                                  "config": {"Entrypoint": ["/pause"], "User": "65535:65535"}})

userland = os.path.join(out, "userland")
subprocess.run(["rm", "-rf", userland], check=True)
for d in ["etc/ld.so.conf.d", "lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64"]:
    os.makedirs(os.path.join(userland, d), exist_ok=True)
libs = ["libc.so.6", "libm.so.6", "libgcc_s.so.1", "libdl.so.2", "libpthread.so.0", "ld-linux-x86-64.so.2"]
for lib in libs:
    subprocess.run(["cp", os.path.join(GLIBC, lib), os.path.join(userland, "lib/x86_64-linux-gnu", lib)], check=True)
open(os.path.join(userland, "etc/ld.so.conf"), "w").write("include /etc/ld.so.conf.d/*.conf\n")
open(os.path.join(userland, "etc/ld.so.conf.d/x86_64-linux-gnu.conf"), "w").write(
    "/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n")
subprocess.run(["/usr/sbin/ldconfig", "-r", userland], check=True)
workload = merged(BASE, busybox, {
    "name": "registry.testbed.invalid/workload:1",
    "files": [[os.path.join(userland, "lib/x86_64-linux-gnu", lib), GLIBC + "/" + lib, 0o755] for lib in libs]
             + [["/usr/sbin/ldconfig", "/sbin/ldconfig", 0o755],
                [os.path.join(userland, "etc/ld.so.cache"), "/etc/ld.so.cache", 0o644]],
    "texts": [["/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n", 0o644],
              ["/etc/ld.so.conf.d/x86_64-linux-gnu.conf",
               "/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n", 0o644]],
    "dirs": [["/usr/lib/x86_64-linux-gnu", 0o755], ["/usr/bin", 0o755]],
    "symlinks": [["/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"]],
    "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}})
images["workload"] = build("workload", workload)

names = {}
for key, (tar, digest) in images.items():
    names[key] = {"tar": tar, "digest": digest}
upgrades = {"gpuHandler": images["gpuHandlerNext"][1]}
json.dump({"registry": REGISTRY, "digests": digests, "upgrades": upgrades, "images": names}, open(os.path.join(node_dir, "images.json"), "w"),
          indent=1)
