#!/usr/bin/env bash
# CI for realnet's verbs fabric (feature `verbs`): installs what the ibverbs
# crate's build needs, then lints and tests with the feature on.
#
# ibverbs-sys configures and builds its bundled rdma-core with cmake and
# generates bindings with bindgen (libclang). Measured in a clean Debian 12
# root (debootstrap minbase plus this image's gcc, make, pkg-config and
# python3, which rdma-core's cmake also needs), the minimal set is:
#   cmake                  rdma-core's build
#   libibverbs-dev         verbs headers bindgen reads, libibverbs.so to link;
#                          it brings libnl-3-dev and libnl-route-3-dev, which
#                          rdma-core's cmake requires
#   libclang1-14           libclang for bindgen
#   libclang-common-14-dev clang's own headers (stddef.h) for bindgen
# Not needed: clang, libclang-dev (the two libclang packages suffice),
# libudev-dev (optional in rdma-core). First build: about 4 to 5 minutes on
# 2 shared cores. Without an RDMA device the tests that need one print
# "no RDMA device: skipping ..." (see realnet/VERBS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

pkgs=(cmake libibverbs-dev libclang1-14 libclang-common-14-dev pkg-config)
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "== apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    if ! apt-cache show libclang-common-14-dev > /dev/null 2>&1; then
        # Not Debian 12: the unversioned package brings the release's libclang.
        missing=(cmake libibverbs-dev libclang-dev pkg-config)
    fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

echo "== cargo clippy -p realnet --features verbs"
cargo clippy -p realnet --features verbs --all-targets -- -D warnings

echo "== cargo test -p realnet --features verbs"
# --nocapture shows the "no RDMA device: skipping ..." lines of the device tests.
cargo test -p realnet --features verbs -- --nocapture
