#!/usr/bin/env bash
# make_venv.sh DIR REQUIREMENTS [venv flags] [-- pip flags]: a virtual environment beside the
# checkout, made from Debian's Python with its pinned requirements file and made again when the
# pins change (the file is kept inside as the stamp). Used by tools/install_deps.sh (.venv,
# .venv-hta) and tools/peers/torch_venv.sh (.venv-torch).
set -euo pipefail
dir=$1 requirements=$2
shift 2
venv_flags=() pip_flags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do venv_flags+=("$1"); shift; done
[ $# -gt 0 ] && shift
pip_flags=("$@")
stamp=$dir/requirements.installed
if cmp -s "$requirements" "$stamp" 2>/dev/null; then
  echo "make_venv: $dir up to date"
  exit 0
fi
echo "make_venv: creating $dir from $requirements"
started=$SECONDS
rm -rf "$dir"
/usr/bin/python3 -m venv ${venv_flags[@]+"${venv_flags[@]}"} "$dir"
"$dir/bin/pip" install -q --disable-pip-version-check ${pip_flags[@]+"${pip_flags[@]}"} -r "$requirements"
cp "$requirements" "$stamp"
echo "make_venv: $dir created in $((SECONDS - started)) s"
