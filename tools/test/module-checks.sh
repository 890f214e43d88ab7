#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Checks of the module package that need no cluster: promtool on the Prometheus rules, dashboards
# parse and query only metrics that exist, and the generated docs pages are current.
# Prints "N passed, N failed".
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
passed=0; failed=0
check() { # name command...
  local name=$1; shift
  if out=$("$@" 2>&1); then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name"; echo "$out" | sed 's/^/     /'; fi
}

# promtool wants a `groups:` document; the module's files are bare lists of groups (lib-helm's format).
promtool_rules() {
  local file=$1 tmp; tmp=$(mktemp --suffix=.yaml)
  { echo "groups:"; sed 's/^/  /' "$file"; } > "$tmp"
  promtool check rules "$tmp"; local rc=$?; rm -f "$tmp"; return $rc
}
for file in "$repo"/monitoring/prometheus-rules/*.yaml; do
  check "promtool check rules $(basename "$file")" promtool_rules "$file"
done

# Every metric name a rule or dashboard queries must be one a real exporter serves. kube_* and DCGM_*
# are checked here against what kube-state-metrics serves (the DaemonSet, Deployment and Pod series) and
# dcgm-exporter's default counters (NVIDIA/dcgm-exporter etc/default-counters.csv). Our components'
# own gpu_* names are skipped here: the e2e test images/gpu-artifact/testing/e2e/tests/monitoring_metrics.rs
# scrapes the real components and checks every gpu_* name queried in monitoring/ against what they serve.
known_metrics="kube_daemonset_status_number_unavailable kube_deployment_status_replicas_available kube_pod_status_ready
DCGM_FI_DEV_SM_CLOCK DCGM_FI_DEV_MEM_CLOCK DCGM_FI_DEV_MEMORY_TEMP DCGM_FI_DEV_GPU_TEMP DCGM_FI_DEV_POWER_USAGE
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION DCGM_FI_DEV_PCIE_TX_THROUGHPUT DCGM_FI_DEV_PCIE_RX_THROUGHPUT
DCGM_FI_DEV_PCIE_REPLAY_COUNTER DCGM_FI_DEV_GPU_UTIL DCGM_FI_DEV_MEM_COPY_UTIL DCGM_FI_DEV_ENC_UTIL
DCGM_FI_DEV_DEC_UTIL DCGM_FI_DEV_XID_ERRORS DCGM_FI_DEV_FB_FREE DCGM_FI_DEV_FB_USED DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL
DCGM_FI_DEV_VGPU_LICENSE_STATUS DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS
DCGM_FI_DEV_ROW_REMAP_FAILURE"
queried_metrics() {
  python3 - "$repo" <<'PY'
import json, pathlib, re, sys, yaml
repo = pathlib.Path(sys.argv[1])
exprs = []
for f in sorted(repo.glob("monitoring/prometheus-rules/*.yaml")):
    exprs += [r["expr"] for g in yaml.safe_load(f.read_text()) for r in g["rules"]]
for f in sorted(repo.glob("monitoring/grafana-dashboards/*/*.json")):
    d = json.loads(f.read_text())
    exprs += [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in d["templating"]["list"] if v.get("type") == "query"]
names = set()
for e in exprs:
    e = re.sub(r'\{[^}]*\}', '', re.sub(r'"[^"]*"', '', e))
    for word in re.findall(r'[A-Za-z_:][A-Za-z0-9_:]*', e):
        if re.match(r'^(DCGM_FI_|kube_)', word):
            names.add(word)
print("\n".join(sorted(names)))
PY
}
metrics_exist() {
  local missing=0
  for metric in $(queried_metrics); do
    grep -qw "$metric" <<<"$known_metrics" || { echo "$metric is queried but no exporter serves it"; missing=1; }
  done
  [ "$(queried_metrics | wc -l)" -gt 0 ] && [ $missing = 0 ]
}
check "dashboards and rules parse and query only served metrics" metrics_exist
check "docs generated from openapi and the CRDs are current" python3 "$repo/tools/docs/generate.py" --check

# --- werf.yaml (tools/werf-render): werf needs a registry, so render werf.yaml as werf does and check
# its image graph here; the giterminism check is what plain `werf build` refuses (env names, mount
# fromPaths not in werf-giterminism.yaml); the self-test breaks a copy of werf.yaml on purpose. ---
werf_render() { local bin; bin="$("$repo/tools/werf-render/build.sh")" && "$bin" "$@"; }
check "werf.yaml renders and its image graph is consistent" werf_render --loose-giterminism "$repo"
check "werf.yaml passes werf's giterminism (werf-giterminism.yaml)" werf_render "$repo"
check "werf-render fails on deliberately broken copies of werf.yaml" "$repo/tools/werf-render/build.sh" --test
# --- end werf.yaml ---

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
