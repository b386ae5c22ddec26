#!/bin/bash
# Hostile-user reliability round against the blockscope CLI: mpirun, caches, signals, outputs.
# Usage: [FILTER='O0[1-5]|K.*'] ./run_cases.sh [outputs caches signals mpirun]
# Every case: c ID SURFACE "EXPECTED" 'SETUP' 'COMMAND' 'CHECK' (lib.sh); results in
# $HOSTILE_DIR/results (default /tmp/hostile; ID.out, ID.err, ID.chk, summary.tsv). Expected
# behaviour per case is its third argument; verdicts are judged by reading the results (ok,
# hang, damaged file, silently wrong, unclear error, wrong exit code, cosmetic). Needs root
# (tmpfs mounts), Open MPI, and the CLI under test: BLOCKSCOPE=path, else $HOSTILE_DIR/bin/blockscope.
# About 12 minutes on 2 cores. Not part of CI: the findings' tests are.
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "${HOSTILE_DIR:-/tmp/hostile}" && cd "${HOSTILE_DIR:-/tmp/hostile}" || exit 1
cp "$here/rankwrap.sh" . 2>/dev/null
source "$here/lib.sh"
sections=${*:-outputs caches signals mpirun}
for s in $sections; do source "$here/cases_$s.sh"; done
