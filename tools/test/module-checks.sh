#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Checks of the module package that need no cluster: the real dmt (Deckhouse Module Tool) lints the
# module, then what dmt does not check: dashboards and rules query only metrics that exist, oss.yaml
# names the versions the build uses, the Rust toolchain check, and werf.yaml's image graph.
# (dmt runs promtool's rule checks on the rendered PrometheusRules, validates dashboards, CRDs, the
# openapi schemas, docs, RBAC placement, container security, mount points, licences and oss.yaml.)
# Prints "N passed, N failed".
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
passed=0; failed=0
check() { # name command...
  local name=$1; shift
  if out=$("$@" 2>&1); then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name"; echo "$out" | sed 's/^/     /'; fi
}

# --- dmt: `dmt lint .` as Deckhouse's CI runs it, and again with values that render every part
# (the monitoring modules on, GPU nodes placed).
# Fails on any error; warnings are printed (each one kept has its reason in .dmtlint.yaml or module.yaml). ---
# dmt lints every file under the directory it is given; Deckhouse's CI gives it a clean checkout, so it
# lints a copy of the files git tracks or would track here (no build output, no .testbed/).
dmt_tree=""
dmt_ready() { # sets dmt_bin and dmt_tree
  dmt_bin="$("$repo/tools/install/dmt.sh")" || return 1
  if [ -z "$dmt_tree" ]; then
    dmt_tree=$(mktemp -d); trap 'rm -rf "$dmt_tree"' EXIT
    (cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$dmt_tree" 2>/dev/null) \
      || cp -r "$repo/." "$dmt_tree"
  fi
}
dmt_lint() { # [dmt flags...]
  dmt_ready || return 1
  local out; out=$(cd "$dmt_tree" && "$dmt_bin" lint "$@" . 2>&1); local rc=$?
  sed 's/\x1b\[[0-9;]*m//g' <<<"$out" | grep -v '^[0-9T:-]*Z ' | grep -E '^🐒|Message:|Object:|FilePath:|Errors:|Warnings:|Critical:'
  return $rc
}
# What plain `dmt lint .` checks is what it renders with dmt's own stub values (Kubernetes 1.29, no
# monitoring modules: dmt internal/modules/values/global_stubs.yaml). Every template must render there,
# or Deckhouse's CI never lints it. The only templates allowed to render nothing are the monitoring
# objects of modules dmt's stubs leave off (operator-prometheus, prometheus); the run with
# tools/test/dmt-values.yaml lints those.
stub_render_leaves_out="templates/gpu-handler/podmonitor.yaml templates/gpu-node-agent/podmonitor.yaml templates/rbac-to-us.yaml"
dmt_renders_every_template() {
  dmt_ready || return 1
  local out; out=$(mktemp -d)
  (cd "$dmt_tree" && "$dmt_bin" render . -o "$out" >/dev/null 2>&1) || { echo "dmt render failed"; rm -rf "$out"; return 1; }
  local missing=0 template
  for template in $(cd "$repo" && git ls-files -co --exclude-standard 'templates/*.yaml'); do
    grep -qw "$template" <<<"$stub_render_leaves_out" && continue
    if [ ! -s "$out/rendered/gpu/default/$template" ]; then
      echo "$template renders nothing under dmt's stub values: Deckhouse's CI would never lint it"; missing=1
    fi
  done
  rm -rf "$out"; return $missing
}
check "dmt lint (Deckhouse CI's invocation)" dmt_lint
check "every template renders under dmt's stub values (what Deckhouse CI's dmt lint sees)" dmt_renders_every_template
check "dmt lint with the monitoring parts rendered (tools/test/dmt-values.yaml)" dmt_lint -f "$repo/tools/test/dmt-values.yaml"
# --- end dmt ---

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

# The alerts fire and resolve as their rules promise: promtool's rule unit tests (tools/test/alert-tests)
# on the rule files wrapped in `groups:`, the shape Deckhouse renders them into.
alert_tests() {
  local tmp rc=0; tmp=$(mktemp -d)
  for rules in "$repo"/monitoring/prometheus-rules/*.yaml; do
    { echo "groups:"; sed 's/^/  /' "$rules"; } > "$tmp/$(basename "$rules")"
  done
  for test in "$repo"/tools/test/alert-tests/*.yaml; do
    cp "$test" "$tmp/test-$(basename "$test")"
    promtool test rules "$tmp/test-$(basename "$test")" || rc=1
  done
  rm -rf "$tmp"; return $rc
}
check "alerts fire and resolve as tools/test/alert-tests expects (promtool test rules)" alert_tests

# oss.yaml's versions are the ones the build uses: the NVIDIA images' (build/components/upstream-images.yml)
# and the Rust crates' (images/gpu-artifact/Cargo.lock).
oss_versions_match() {
  python3 - "$repo" <<'PY'
import pathlib, re, sys, yaml
repo = pathlib.Path(sys.argv[1])
oss = {p["id"]: p["version"] for p in yaml.safe_load((repo / "oss.yaml").read_text())}
used = {u["oss"]: u["version"] for u in yaml.safe_load((repo / "build/components/upstream-images.yml").read_text()).values()}
lock = (repo / "images/gpu-artifact/Cargo.lock").read_text()
for crate, oss_id in {"kube": "kube-rs", "nvml-wrapper": "nvml-wrapper", "rcgen": "rcgen",
                      "tikv-jemallocator": "tikv-jemallocator"}.items():
    used[oss_id] = re.search(r'name = "%s"\nversion = "([^"]+)"' % re.escape(crate), lock).group(1)
wrong = [f"{i}: oss.yaml says {oss.get(i)!r}, the build uses {v!r}" for i, v in sorted(used.items()) if oss.get(i) != v]
print("\n".join(wrong) or f"{len(used)} projects in step")
sys.exit(1 if wrong else 0)
PY
}
check "oss.yaml versions are the ones the build uses" oss_versions_match

# lib-helm is vendored as Deckhouse modules vendor it (deckhouse/virtualization: charts/*.tgz, Chart.yaml's
# dependency, requirements.lock): the archive, Chart.yaml and requirements.lock name one version, and the
# lock's digest is the one helm computes (helm.sh/helm/v3 internal/resolver HashReq: sha256 of the JSON
# [Chart.yaml's dependencies, the lock's]), so `helm dependency build` takes the lock as in sync.
lib_helm_locked() {
  python3 - "$repo" <<'PY'
import hashlib, json, pathlib, sys, tarfile, yaml
repo = pathlib.Path(sys.argv[1])
chart = yaml.safe_load((repo / "Chart.yaml").read_text())
lock = yaml.safe_load((repo / "requirements.lock").read_text())
archives = sorted((repo / "charts").glob("deckhouse_lib_helm-*.tgz"))
problems = []
if len(archives) != 1:
    problems.append(f"charts/ holds {len(archives)} lib-helm archives")
else:
    with tarfile.open(archives[0]) as tar:
        vendored = yaml.safe_load(tar.extractfile("deckhouse_lib_helm/Chart.yaml"))["version"]
    for where, deps in (("Chart.yaml", chart["dependencies"]), ("requirements.lock", lock["dependencies"])):
        if [d["version"] for d in deps if d["name"] == "deckhouse_lib_helm"] != [vendored]:
            problems.append(f"{where} does not name the vendored lib-helm {vendored}")
fields = ("name", "version", "repository")
as_helm = lambda deps: [{k: d[k] for k in fields if d.get(k)} for d in deps]
digest = "sha256:" + hashlib.sha256(json.dumps([as_helm(chart["dependencies"]), as_helm(lock["dependencies"])],
                                               separators=(",", ":")).encode()).hexdigest()
if lock["digest"] != digest:
    problems.append(f"requirements.lock digest {lock['digest']}, helm computes {digest}")
print("\n".join(problems) or f"lib-helm {vendored} locked")
sys.exit(1 if problems else 0)
PY
}
check "lib-helm is vendored with requirements.lock as helm writes it" lib_helm_locked

# The build's Rust toolchain check passes this machine's rustc and stops an older one at once.
rust_version_check() {
  local stub; stub=$(mktemp)
  printf '#!/bin/sh\necho "rustc 1.70.0 (90c541806 2023-05-31)"\n' > "$stub"; chmod +x "$stub"
  "$repo/tools/build/check-rust-version.sh" "$repo/images/gpu-artifact/Cargo.toml" || { rm -f "$stub"; return 1; }
  if RUSTC="$stub" "$repo/tools/build/check-rust-version.sh" "$repo/images/gpu-artifact/Cargo.toml"; then
    rm -f "$stub"; echo "an older rustc passed the check"; return 1
  fi
  rm -f "$stub"
}
check "the Rust toolchain check accepts this rustc and refuses rustc 1.70" rust_version_check

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
