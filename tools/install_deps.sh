#!/usr/bin/env bash
# Installs blockscope's build and test dependencies from Debian packages (run as root, or
# with sudo available). The CUDA toolkit (nvcc, cuBLASLt, NVTX, CUPTI) is expected from the
# machine image; without it blockscope builds the CPU backend only.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config ccache lld  # ccache and lld: CI's build time (docs/CONTRIBUTING.md)
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark-tools
  libdnnl-dev libopenblas-dev libboost-context-dev
  libopenmpi-dev openmpi-bin  # tensor parallelism's MPI communicator and its 2-rank test (mpirun)
  clang libclang-rt-14-dev libomp-dev
  python3 python3-dev python3-venv python3-numpy python3-matplotlib python3-torch
  chromium fonts-dejavu-core  # the HTML report's browser test (headless; a font for its screenshots)
)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all packages present"
else
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -q
  as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cd "$(dirname "$0")/.."
# Virtual environments beside the checkout, each from its pinned requirements file
# (tools/make_venv.sh: made again when the pins change).
# The Python package's tools from PyPI (nanobind, scikit-build-core, pytest), pinned in
# tools/python-requirements.txt, in .venv/: Debian's Python (PEP 668 keeps pip out of it) with
# its numpy and torch visible.
tools/make_venv.sh .venv tools/python-requirements.txt --system-site-packages
# Holistic Trace Analysis for the HTA agreement test (test/hta/), in .venv-hta/: its own
# environment (its numpy 2 would break Debian's torch in .venv), HTA without its declared
# requirements (JupyterLab and more) and only what its analyses import, every one pinned in
# tools/hta-requirements.txt (--no-deps: nothing unpinned comes in). The import is the check.
tools/make_venv.sh .venv-hta tools/hta-requirements.txt -- --no-deps
.venv-hta/bin/python -c "import hta.trace_analysis" 2>/dev/null ||
  { echo "install_deps: .venv-hta cannot import hta.trace_analysis (tools/hta-requirements.txt misses a module?)" >&2
    .venv-hta/bin/python -c "import hta.trace_analysis"; exit 1; }
