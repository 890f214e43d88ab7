#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# `make fuzz`: the long run of the property tests of every parser of outside input (issue 17, item 7):
# PROPERTY_CASES cases each (default 1,000,000; `make test` runs the same properties with 256), in
# release builds, two test threads. Prints each property's count and ends with "N passed, N failed".
# A failing input is shrunk and kept beside its test as `<file>.regressions`: commit it.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export PROPERTY_CASES="${PROPERTY_CASES:-1000000}"
logs="$(mktemp -d "${TMPDIR:-/tmp}/gpu-make-fuzz.$(date +%Y%m%d-%H%M%S).XXXX")"
echo "logs of this run: $logs; $PROPERTY_CASES cases per property"
start=$(date +%s)
( cd "$repo/images/gpu-artifact" && cargo test --release --locked \
    -p gpu-api -p host-inventory -p node-prepare -p kubelet-plugin -p claim-preparation -p gpu-module-hooks -p dra-cel \
    -- property_ --nocapture --test-threads=2 ) 2>&1 | tee "$logs/fuzz.log"
rc=${PIPESTATUS[0]}
echo
echo "=== property runs ==="
# Two test threads print side by side: a count may follow another line's text, so match it anywhere.
grep -oE "property [^:]+: [0-9]+ cases passed \([^)]*\)( in [0-9.]+ s)?" "$logs/fuzz.log" | sort -u
passed=$(grep -E '^test result:' "$logs/fuzz.log" | sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed.*/\1/' | awk '{s+=$1} END {print s+0}')
failed=$(grep -E '^test result:' "$logs/fuzz.log" | sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed.*/\2/' | awk '{s+=$1} END {print s+0}')
[ "$rc" = 0 ] || [ "$failed" != 0 ] || failed=1
echo "total time $(( $(date +%s) - start ))s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
