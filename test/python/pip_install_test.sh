#!/bin/sh
# pip_install_test.sh ROOT PYTHON OUT: README's `pip install .` as a test -- the wheel built by
# scikit-build-core from this checkout (with the build tools of .venv/: no download), installed
# into OUT, then the installed package runs the example and the installed program its info.
set -eu
root=$1 python=$2 out=$3
rm -rf "$out"
"$python" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps --target "$out" "$root"
test -x "$out/bin/blockscope" || { echo "pip_install_test: the wheel has no blockscope program" >&2; exit 1; }
test -f "$out/blockscope/_core.pyi" || { echo "pip_install_test: the wheel has no type stubs" >&2; exit 1; }
"$out/bin/blockscope" info --format json > "$out/info.json"
cd "$out"  # not the checkout: the installed package, not python/ or the build tree's
PYTHONPATH="$out" "$python" -c "import blockscope, sys; assert blockscope.__file__.startswith(sys.argv[1]), blockscope.__file__" "$out"
PYTHONPATH="$out" "$python" "$root/examples/python_session.py" > "$out/example.txt"
echo "pip_install_test: installed into $out; the example ran ($(wc -l < "$out/example.txt") lines)"
