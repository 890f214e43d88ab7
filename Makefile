# The two commands: `make demo` (two simulated GPU nodes on a real control plane) and `make test` (everything CI runs).
GPU_CACHE ?= $(HOME)/.cache/deckhouse-gpu
export GPU_CACHE
# One cargo target directory per checkout: cargo trusts an artifact whose recorded sources (absolute
# paths) look older than it, so two checkouts sharing one target directory can link each other's code.
export CARGO_TARGET_DIR ?= $(GPU_CACHE)/cargo-target/$(shell printf '%s' "$(CURDIR)" | sha1sum | cut -c1-12)
K8S ?= 1.34

.PHONY: test fuzz demo demo-down bench control-plane cluster-up cluster-down fmt lint crds

test:
	tools/test/run.sh

# The long run of the parsers' property tests: 1,000,000 cases each (PROPERTY_CASES overrides).
fuzz:
	tools/test/fuzz.sh

demo:
	@K8S=$(K8S) tools/demo/demo-up.sh

demo-down:
	@tools/demo/demo-down.sh

bench:
	tools/bench/run.sh

control-plane:
	tools/testbed/build-control-plane.sh 1.34
	tools/testbed/build-control-plane.sh latest

cluster-up:
	@tools/install/deps.sh
	@tools/testbed/cluster-up.sh $(K8S)

cluster-down:
	@tools/testbed/cluster-down.sh

fmt:
	cd images/gpu-artifact && cargo fmt --all

lint:
	cd images/gpu-artifact && cargo fmt --all -- --check && cargo clippy --workspace --all-targets -- -D warnings

# Rewrites crds/*.yaml from the Rust types (a test fails while they are stale).
crds:
	cd images/gpu-artifact && UPDATE_CRDS=1 cargo test -p gpu-api --lib crd::tests::crd_files_are_generated_from_the_types
