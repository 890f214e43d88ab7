#!/usr/bin/env python3
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
"""Builds one OCI image archive (an OCI layout in a tar, what `ctr images import` reads) from a JSON
spec on stdin, with one uncompressed layer written deterministically (sorted, mtime 0, root-owned), so
the same inputs give the same digest. Prints the manifest digest.

Spec: {"name": "<image ref>" | null, "repository": "<repo>" (name = <repo>@<digest> when name is null),
       "files": [[src, dst, mode]], "dirs": [[dst, mode]], "symlinks": [[dst, target]],
       "texts": [[dst, content, mode]], "config": {OCI image config: Entrypoint, Env, User, WorkingDir}}
    oci-image.py <out.tar> < spec.json"""
import hashlib
import io
import json
import sys
import tarfile


def layer(spec):
    entries = {}

    def parents(path):
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            entries.setdefault(d, ("dir", 0o755, None))

    for dst, mode in spec.get("dirs", []):
        parents(dst)
        entries[dst.strip("/")] = ("dir", mode, None)
    for src, dst, mode in spec.get("files", []):
        parents(dst)
        with open(src, "rb") as f:
            entries[dst.strip("/")] = ("file", mode, f.read())
    for dst, content, mode in spec.get("texts", []):
        parents(dst)
        entries[dst.strip("/")] = ("file", mode, content.encode())
    for dst, target in spec.get("symlinks", []):
        parents(dst)
        entries[dst.strip("/")] = ("link", 0o777, target)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(entries):
            kind, mode, data = entries[path]
            info = tarfile.TarInfo(path)
            info.mtime, info.uid, info.gid, info.mode = 0, 0, 0, mode
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def blob(blobs, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"digest": digest, "size": len(data)}


def main():
    spec = json.load(sys.stdin)
    blobs = {}
    data = layer(spec)
    layer_desc = dict(mediaType="application/vnd.oci.image.layer.v1.tar", **blob(blobs, data))
    config = {
        "architecture": "amd64", "os": "linux", "config": spec.get("config", {}),
        "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]},
    }
    config_desc = dict(mediaType="application/vnd.oci.image.config.v1+json",
                       **blob(blobs, json.dumps(config, sort_keys=True).encode()))
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config_desc, "layers": [layer_desc]}
    manifest_desc = dict(mediaType="application/vnd.oci.image.manifest.v1+json",
                         **blob(blobs, json.dumps(manifest, sort_keys=True).encode()))
    name = spec.get("name") or f'{spec["repository"]}@{manifest_desc["digest"]}'
    manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
    manifest_desc["annotations"] = {"io.containerd.image.name": name}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [manifest_desc]}
    with tarfile.open(sys.argv[1], "w") as tar:
        def add(path, data):
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add("index.json", json.dumps(index).encode())
        for digest, data in sorted(blobs.items()):
            add("blobs/sha256/" + digest.split(":")[1], data)
    print(manifest_desc["digest"])


main()
