#!/usr/bin/env bash
# Makes .venv-torch/: a current PyTorch from PyPI (tools/peers/torch-requirements.txt, pinned)
# for the peers, beside Debian's python3-torch 1.13 that tools/install_deps.sh installs. Debian's
# Python 3.11, so the build tree's blockscope package (build/<preset>/python) loads in it too.
# About 5 GB (torch's CUDA wheels come with it; they are not needed on a CPU): not part of CI.
#
#   tools/peers/torch_venv.sh            # then, e.g.:
#   PYTHON=.venv-torch/bin/python tools/peers/cpu_side_by_side.sh
#
# Made again when the pins change (tools/make_venv.sh); prints the interpreter's path.
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/make_venv.sh .venv-torch tools/peers/torch-requirements.txt >&2
.venv-torch/bin/python -c 'import torch, numpy; print("torch_venv: torch", torch.__version__, "numpy", numpy.__version__)' >&2
echo "$PWD/.venv-torch/bin/python"
