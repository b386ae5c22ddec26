#!/usr/bin/env bash
# Register-spill gate for our CUDA kernels (CI runs it after a CUDA build).
#
#   tools/ci/check_ptxas.sh BUILD_LOG       check a build log. CMakeLists.txt compiles .cu files
#                                        with -Xptxas=-warn-spills, so ptxas prints
#                                        "ptxas warning : Registers are spilled to local memory
#                                        in function '...', N bytes spill stores, M bytes spill
#                                        loads" for every spilling kernel. Any such line with a
#                                        non-zero count in one of our kernels (mangled names in
#                                        namespace blockscope) fails the check.
#   tools/ci/check_ptxas.sh --report BUILD_DIR
#                                        recompile every .cu of BUILD_DIR's compile_commands.json
#                                        with -Xptxas=-v (objects go to a temporary folder) and
#                                        print registers, shared memory and spills per kernel
#                                        and architecture; fails on any spill. Slow: a full CUDA
#                                        compile.
# Exit status: 0 clean, 1 spills found, 2 bad usage or unreadable input.
set -euo pipefail

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 2
}

# Reads ptxas output on stdin; prints offending lines; returns 1 if any of ours spill.
scan_spills() {
  awk '
    /bytes spill stores/ && /10blockscope|blockscope::/ {
      match($0, /[0-9]+ bytes spill stores/); stores = substr($0, RSTART, RLENGTH) + 0
      match($0, /[0-9]+ bytes spill loads/);  loads = substr($0, RSTART, RLENGTH) + 0
      if (stores > 0 || loads > 0) { print "spill: " $0; bad = 1 }
      next
    }
    /Registers are spilled to local memory/ && /10blockscope|blockscope::/ { print "spill: " $0; bad = 1 }
    END { exit bad }'
}

if [[ $# -eq 1 && "$1" != --* ]]; then
  log="$1"
  [[ -r "$log" ]] || { echo "check_ptxas: cannot read build log '$log'" >&2; exit 2; }
  cuda_objects=$(grep -c "Building CUDA object" "$log" || true)
  if [[ "$cuda_objects" -eq 0 ]]; then
    echo "check_ptxas: note: '$log' shows no CUDA compilation (an incremental build?); nothing to check"
    exit 0
  fi
  if ! scan_spills < "$log"; then
    echo "check_ptxas: FAILED: register spills in our kernels (see lines above); reduce live state or" \
         "add __launch_bounds__" >&2
    exit 1
  fi
  echo "check_ptxas: ok: $cuda_objects CUDA objects compiled, no register spills in our kernels"
  exit 0
fi

if [[ $# -eq 2 && "$1" == --report ]]; then
  build_dir="$2"
  commands="$build_dir/compile_commands.json"
  [[ -r "$commands" ]] || { echo "check_ptxas: no $commands (configure with CMake first)" >&2; exit 2; }
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  # One verbose recompilation per .cu file, output object redirected into the scratch folder.
  python3 - "$commands" "$scratch" > "$scratch/commands.sh" <<'PY'
import json, shlex, sys
entries, scratch = json.load(open(sys.argv[1])), sys.argv[2]
for i, entry in enumerate(e for e in entries if e["file"].endswith(".cu")):
    # Drop the dependency-file arguments (-MD, -MF file, -MT target); redirect the object.
    cleaned, skip = [], False
    for a in shlex.split(entry["command"]):
        if skip: skip = False; continue
        if a in ("-MF", "-MT"): skip = True; continue
        if a == "-MD": continue
        cleaned.append(a)
    cleaned[cleaned.index("-o") + 1] = f"{scratch}/{i}.o"
    print("cd " + shlex.quote(entry["directory"]) + " && " + " ".join(map(shlex.quote, cleaned)) + " -Xptxas=-v")
PY
  bash "$scratch/commands.sh" > "$scratch/ptxas.log" 2>&1 || { cat "$scratch/ptxas.log" >&2; exit 2; }
  # Table: kernel (demangled when c++filt exists), arch, registers, smem, spill stores/loads.
  demangle="cat"
  command -v c++filt > /dev/null && demangle=c++filt
  awk '
    /Compiling entry function/ { match($0, /function .[^'"'"']+/); fn = substr($0, RSTART + 10, RLENGTH - 10);
                                 match($0, /for .sm_[0-9a-z]+/); arch = substr($0, RSTART + 5, RLENGTH - 5) }
    /bytes spill stores/ { match($0, /[0-9]+ bytes spill stores/); st = substr($0, RSTART, RLENGTH) + 0;
                           match($0, /[0-9]+ bytes spill loads/); ld = substr($0, RSTART, RLENGTH) + 0 }
    /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); regs = substr($0, RSTART + 5, RLENGTH - 15) + 0;
                              smem = 0; if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH) + 0;
                              printf "%s\t%s\t%d\t%d\t%d\t%d\n", arch, fn, regs, smem, st, ld }
  ' "$scratch/ptxas.log" | sort -u > "$scratch/table.tsv"
  printf "%-6s %5s %6s %6s %6s  %s\n" arch regs smem spillS spillL kernel
  while IFS=$'\t' read -r arch fn regs smem st ld; do
    printf "%-6s %5s %6s %6s %6s  %s\n" "$arch" "$regs" "$smem" "$st" "$ld" "$(echo "$fn" | $demangle)"
  done < "$scratch/table.tsv"
  kernels=$(wc -l < "$scratch/table.tsv")
  spilling=$(awk -F'\t' '$5 > 0 || $6 > 0' "$scratch/table.tsv" | wc -l)
  if [[ "$spilling" -gt 0 ]]; then
    echo "check_ptxas: FAILED: $spilling of $kernels kernel builds spill registers" >&2
    exit 1
  fi
  echo "check_ptxas: ok: $kernels kernel builds, no register spills"
  exit 0
fi

usage
