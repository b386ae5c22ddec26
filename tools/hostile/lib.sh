# Helpers for run_cases.sh (sourced).
# c ID SURFACE "EXPECTED" 'SETUP' 'COMMAND' ['CHECK']
#   SETUP, COMMAND and CHECK run with bash in a fresh scratch dir $D (= $R/ID.d).
#   COMMAND is wrapped in `timeout -k 5 $TMO` (124/137 = hang). Recorded in $R/ID.{out,err,chk}
#   and one row of $R/summary.tsv: id, surface, rc, seconds, leftovers (.tmp.* / probes), check.
# HOSTILE_DIR: where the cases run and results go; BLOCKSCOPE: the CLI under test (a copy, so
# a rebuild does not change it mid-round); the configs are this checkout's.
H=${HOSTILE_DIR:-/tmp/hostile}
SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export B=${BLOCKSCOPE:-$H/bin/blockscope} C=$SOURCE/configs R=$H/results
export XDG_CACHE_HOME=$H/xdg
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export MPI="mpirun --oversubscribe -np 2"
export TINY=$C/blocks/tiny-gpt2.yaml LLAMA=$C/blocks/tiny-llama.yaml DEC=$C/decode/tiny-llama-decode.yaml
TMO=${TMO:-120}
FILTER=${FILTER:-.*}
mkdir -p "$R"

c() {
  local id=$1 surf=$2 exp=$3 setup=$4 cmd=$5 check=${6:-}
  [[ $id =~ ^($FILTER)$ ]] || return 0
  export D=$R/$id.d
  rm -rf "$D"; mkdir -p "$D"; cd "$D" || return
  [ -n "$setup" ] && bash -c "$setup" >"$R/$id.setup" 2>&1
  local t0=$(date +%s.%N)
  timeout -k 5 "$TMO" bash -c "$cmd" >"$R/$id.out" 2>"$R/$id.err"
  local rc=$?
  local t1=$(date +%s.%N)
  local left
  left=$(find "$D" "$H/xdg" -maxdepth 3 \( -name '.*.tmp.*' -o -name '.blockscope-probe*' \) 2>/dev/null | tr '\n' ' ')
  local chk=""
  [ -n "$check" ] && chk=$(cd "$D" && bash -c "$check" 2>&1 | tr '\n' ' ' | cut -c1-300)
  echo "$chk" >"$R/$id.chk"
  printf '%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\n' "$id" "$surf" "$rc" "$(echo "$t1 - $t0" | bc)" "${left:--}" "$chk" "$exp" "$cmd" >>"$R/summary.tsv"
  printf '%-5s %-7s rc=%-3s %5.1fs left=[%s] chk=[%s]\n' "$id" "$surf" "$rc" "$(echo "$t1 - $t0" | bc)" "$left" "$chk"
  cd "$H"
}

# sig SIG DELAY|/MARKER/ CMD...: start CMD (job control on, as a terminal would), send SIG once
# DELAY seconds passed or once MARKER appears on its stderr (then sleep $AFTER), wait, print
# "rc=N latency=S" (latency: from the signal to the exit). Stderr goes to sig.err (and is copied).
sig() {
  local s=$1 when=$2; shift 2
  set -m
  "$@" 2>sig.err &
  local pid=$!
  if [[ $when == /*/ ]]; then
    local m=${when:1:-1} n=0
    until grep -q -- "$m" sig.err 2>/dev/null || ! kill -0 $pid 2>/dev/null || [ $n -ge 6000 ]; do sleep 0.01; n=$((n+1)); done
    sleep "${AFTER:-0}"
  else
    sleep "$when"
  fi
  local alive=yes; kill -0 $pid 2>/dev/null || alive=no
  local t0=$(date +%s.%N)
  kill -"$s" $pid 2>/dev/null
  [ -n "$TWICE" ] && { sleep "$TWICE"; kill -"$s" $pid 2>/dev/null; }
  wait $pid; local rc=$?
  local t1=$(date +%s.%N)
  cat sig.err >&2
  echo "alive_at_signal=$alive rc=$rc latency=$(echo "$t1 - $t0" | bc)" | tee sig.res >&2
}
export -f sig
