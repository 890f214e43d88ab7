#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# The ldd closure of an upstream image's binaries, shipped whole: every shared library the given ELF
# objects load, as ldd resolves them in the image this runs in, copied into <dest>/usr/lib/x86_64-linux-gnu
# (the loader into <dest>/lib64, where the objects' PT_INTERP names it). Loader, libc and the rest then
# come from one glibc build, the one the binaries were built against. Left out: the NVIDIA driver's own
# libraries (libnvidia-*, libcuda), which must come from the host's driver root at run time. Prints
# the closure, one library a line, for the build log.
#   ldd-closure.sh <dest> <object>...
set -euo pipefail
dest=$1; shift
closure=$(
  for object in "$@"; do
    # A script or a static binary has no closure: ldd says so and fails.
    ldd "$object" 2>/dev/null || true
  done | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u \
    | grep -Ev '/lib(nvidia-[^/]*|cuda)\.so' || true
)
[ -n "$closure" ] || { echo "ldd-closure.sh: no shared library found for $*" >&2; exit 1; }
mkdir -p "$dest/lib64" "$dest/usr/lib/x86_64-linux-gnu"
for lib in $closure; do
  case "$(basename "$lib")" in
    ld-linux-x86-64.so.2) cp -L "$lib" "$dest/lib64/ld-linux-x86-64.so.2" ;;
    *) cp -L "$lib" "$dest/usr/lib/x86_64-linux-gnu/$(basename "$lib")" ;;
  esac
done
printf '%s\n' $closure
