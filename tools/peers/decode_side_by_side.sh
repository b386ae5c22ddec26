#!/usr/bin/env bash
# The CPU decode side-by-side: blockscope's `workload: decode` (blockscope profile: time to first
# token and per-token time) against PyTorch's eager decode loop with a DynamicCache
# (tools/peers/torch_decode_peer.py, on blockscope's own weights and inputs, its outputs checked
# against blockscope's before it is timed), one thread on each side, every pool pinned.
#
#   tools/peers/decode_side_by_side.sh [OUT_DIR] [BUILD_DIR]
#
# OUT_DIR (default bench/results/cpu-decode-<date>) gets, per row and round, blockscope's profile
# JSON (<row>.r<round>.blockscope.json, its progress in .blockscope.log) and the peer's JSON
# (<row>.r<round>.torch.json, its log .torch.log), and the merged table decode_side_by_side.md with
# the context (CPU, ISA, torch, blockscope's GEMM libraries, the command, the date). BUILD_DIR
# (default: the newer of build/default and build/cpu) must hold bin/blockscope.
#
# Rows: every config of DECODE_CONFIGS x every dtype of DECODE_DTYPES, each run with --set
# dtype=<dtype> decode.batch=$BATCH decode.prompt_len=$PROMPT_LEN decode.new_tokens=$NEW_TOKENS
# compare=[] (the config's own paths and cache layout otherwise). Both sides run WARMUP untimed
# generations, then REPS timed ones (blockscope: profile.schedule {wait: 0, warmup: WARMUP,
# active: REPS}); TTFT is the median prefill over the REPS generations, per-token the median
# step over REPS x NEW_TOKENS steps. ROUNDS (default 1) runs each row's pair that many times,
# alternating the sides (blockscope, PyTorch, blockscope, ...), and the table takes, per side and
# per figure, the round with the lowest median: on a shared machine other work only ever adds
# time, so the least-disturbed round is the best estimate (every round's medians are listed).
# Knobs (environment): DECODE_CONFIGS (default configs/decode/llama-decode.yaml
# configs/decode/gpt2-decode.yaml), DECODE_DTYPES (bf16 f32), BATCH (1), PROMPT_LEN (1024),
# NEW_TOKENS (32), REPS (5), WARMUP (1), ROUNDS (1), PYTHON (the interpreter
# with torch; default /usr/bin/python3, Debian's python3-torch); BATCH, PROMPT_LEN or NEW_TOKENS
# set empty keeps the config's own (a ragged config: BATCH= PROMPT_LEN= keeps its prompt_lens,
# which the peer left-pads as generate() does). OPENBLAS_CORETYPE is passed
# through to both sides, as cpu_side_by_side.sh does (tools/peers/openblas_coretypes.py finds
# the kernel set that makes PyTorch's f32 GEMM fastest).
#
# ratio = PyTorch time / blockscope time (above 1: blockscope is faster), wall time on both sides.
set -euo pipefail
cd "$(dirname "$0")/../.."
command_line="$0 $*"
python=${PYTHON:-/usr/bin/python3}
if [ -n "${2:-}" ]; then
  build=$2
else  # the newer build: an older one may predate workload: decode
  build=build/default
  if [ -x build/cpu/bin/blockscope ] && { [ ! -x build/default/bin/blockscope ] || [ build/cpu/bin/blockscope -nt build/default/bin/blockscope ]; }; then
    build=build/cpu
  fi
fi
blockscope=$build/bin/blockscope
[ -x "$blockscope" ] || { echo "$0: $blockscope not built (cmake --build --preset default)" >&2; exit 2; }
out=${1:-bench/results/cpu-decode-$(date -u +%F)}
mkdir -p "$out"
configs=${DECODE_CONFIGS:-"configs/decode/llama-decode.yaml configs/decode/gpt2-decode.yaml"}
dtypes=${DECODE_DTYPES:-"bf16 f32"}
batch=${BATCH-1}  # unset: the default; set empty: the config's own
prompt_len=${PROMPT_LEN-1024}
new_tokens=${NEW_TOKENS-32}
reps=${REPS:-5}
warmup=${WARMUP:-1}
rounds=${ROUNDS:-1}

# One thread everywhere, the same environment for both sides: blockscope's one OpenMP team
# (oneDNN runs on it, OpenBLAS is pinned too: --threads 1), and on PyTorch's side
# torch_decode_peer.py pins intra-op, OpenMP and OpenBLAS/MKL itself (--threads 1).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

{
  echo "date: $(date -u +%FT%TZ)"
  echo "command: $command_line"
  echo "knobs: DECODE_CONFIGS=\"$configs\" DECODE_DTYPES=\"$dtypes\" BATCH=$batch PROMPT_LEN=$prompt_len NEW_TOKENS=$new_tokens REPS=$reps WARMUP=$warmup ROUNDS=$rounds"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' || echo ' (with uncommitted changes)')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores"
  echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512|amx)' | sort | tr '\n' ' ' | sed 's/ $//')"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "threads: OMP_NUM_THREADS=$OMP_NUM_THREADS OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS MKL_NUM_THREADS=$MKL_NUM_THREADS; blockscope --threads 1; torch_decode_peer.py --threads 1"
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-<unset>}"
  echo "blockscope: $blockscope (built $(date -u -r "$blockscope" +%FT%TZ))"
  "$blockscope" info | grep -E '^(CPU GEMM|This machine)' | sed 's/^/  /'
} > "$out/environment.txt"

: > "$out/rows.txt"
for config in $configs; do
  for dtype in $dtypes; do
    sets=(--set dtype="$dtype")
    row="$(basename "$config" .yaml)_$dtype"
    [ -z "$batch" ] || { sets+=(--set decode.batch="$batch"); row+="_B$batch"; }
    [ -z "$prompt_len" ] || { sets+=(--set decode.prompt_len="$prompt_len"); row+="_P$prompt_len"; }
    [ -z "$new_tokens" ] || { sets+=(--set decode.new_tokens="$new_tokens"); row+="_T$new_tokens"; }
    for round in $(seq 1 "$rounds"); do
      run="$out/$row.r$round"
      echo "decode_side_by_side: $row, round $round of $rounds: blockscope profile" >&2
      # blockscope's status, and the peer's (0 timed, 1 its check failed: no time, 2 no run), go
      # into rows.txt: a row that fails on one side is shown with the reason, the others still run.
      bs_status=0
      "$blockscope" profile "$config" --device cpu --threads 1 --format json "${sets[@]}" --set "compare=[]" \
        --set "profile.schedule={wait: 0, warmup: $warmup, active: $reps}" \
        > "$run.blockscope.json" 2> "$run.blockscope.log" || bs_status=$?
      echo "decode_side_by_side: $row, round $round of $rounds: PyTorch peer" >&2
      torch_status=0
      "$python" tools/peers/torch_decode_peer.py "$config" "${sets[@]}" --threads 1 --reps "$reps" --warmup "$warmup" \
        --blockscope "$blockscope" --out "$run.torch.json" 2> "$run.torch.log" || torch_status=$?
      tail -n 4 "$run.torch.log" | sed 's/^/  /' >&2
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$config" "$dtype" "$row" "$round" "$bs_status" "$torch_status" >> "$out/rows.txt"
    done
  done
done
{
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  # A rebuild during the run would mix binaries: the time it was built, again.
  echo "blockscope at end: $blockscope (built $(date -u -r "$blockscope" +%FT%TZ))"
} >> "$out/environment.txt"

# The tables: one row per (config, dtype) from each side's best round, the spread of its steps
# and the peer's check, then every round's medians.
"$python" - "$out" > "$out/decode_side_by_side.md" <<'EOF'
import json, os, sys

out = sys.argv[1]


def load(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def ms(us):
    """Microseconds as milliseconds, to about 3-4 significant digits."""
    if us is None:
        return "—"
    value = us / 1e3
    return f"{value:.1f}" if value >= 100 else f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def ratio(torch_us, blockscope_us):
    return "—" if not torch_us or not blockscope_us else f"**{torch_us / blockscope_us:.2f}×**"


def last_line(path):
    try:
        with open(path) as handle:
            lines = [line.strip() for line in handle if line.strip()]
        return lines[-1][:200] if lines else "no output"
    except OSError:
        return "no log"


def best(rounds, figure):
    """The round (a dict: ttft_us, per_token_us {...}, ...) with the lowest median of `figure`."""
    timed = [r for r in rounds if r.get(figure)]
    return min(timed, key=lambda r: r[figure]["median"]) if timed else None


def steps(s, chosen):
    """min–max, first / last step, samples, tokens/s of a side's best per-token round."""
    if not s:
        return ["—"] * 4
    tokens = (chosen or {}).get("tokens_per_s")
    return [f"{ms(s['min'])}–{ms(s['max'])}", f"{ms(s['first_step'])} / {ms(s['last_step'])}", str(s["samples"]),
            "—" if not tokens else f"{tokens:.1f}"]


with open(os.path.join(out, "environment.txt")) as handle:
    lines = handle.read().splitlines()
env = dict(line.split(": ", 1) for line in lines if ": " in line and not line.startswith("  "))
rows, notes, torch_context, device_line, impls = {}, [], None, None, set()
for line in open(os.path.join(out, "rows.txt")):
    config, dtype, row, round_, bs_status, torch_status = line.rstrip("\n").split("\t")
    run = os.path.join(out, f"{row}.r{round_}")
    entry = rows.setdefault(row, {"config": config, "dtype": dtype, "bs": [], "torch": [], "workload": {},
                                  "layout": None, "check": None})
    bs, pt = load(run + ".blockscope.json"), load(run + ".torch.json")
    if bs and bs_status == "0":
        device_line = bs.get("device_name", device_line)
        d = bs["variants"][0]["decode"]
        # blockscope reports the TTFT median alone: the same shape as the peer's figures.
        entry["bs"].append({"ttft_us": {"median": d["ttft_us"]}, "per_token_us": d["per_token_us"],
                            "tokens_per_s": d["tokens_per_s"]})
        entry["layout"] = d["kv_cache"]["layout"]
    else:
        notes.append(f"{row} round {round_}: blockscope failed (exit {bs_status}): {last_line(run + '.blockscope.log')}")
    if pt is not None:
        torch_context = torch_context or pt["context"]
        entry["workload"] = pt.get("workload") or entry["workload"]
        entry["check"] = pt.get("check") or entry["check"]
        if pt.get("impl"):
            impls.add(f"{pt['impl'].split('; blockscope')[0]}; {pt.get('ragged')}")
        if pt.get("skipped"):
            notes.append(f"{row} round {round_}: no PyTorch time: {pt['skipped']}")
        else:
            entry["torch"].append(pt)
    else:
        notes.append(f"{row} round {round_}: the PyTorch peer failed (exit {torch_status}): {last_line(run + '.torch.log')}")

main, spread, by_round = [], [], []
for row, e in rows.items():
    w = e["workload"]
    name = os.path.splitext(os.path.basename(e["config"]))[0]
    layout = e["layout"] or w.get("blockscope_kv_cache", {}).get("layout", "?")
    prompts = w.get("prompt_lens") or ["?"]
    prompt = str(prompts[0]) if len(set(prompts)) == 1 else "/".join(map(str, prompts))
    chosen = {(side, figure): best(e[side], figure) for side in ("bs", "torch") for figure in ("ttft_us", "per_token_us")}
    figure = lambda side, name: (chosen[side, name] or {}).get(name) or {}  # noqa: E731
    bt, tt = figure("bs", "ttft_us").get("median"), figure("torch", "ttft_us").get("median")
    bp, tp = figure("bs", "per_token_us").get("median"), figure("torch", "per_token_us").get("median")
    main.append(f"| {name} | {layout} | {e['dtype']} | {w.get('batch', '?')} | {prompt} | {w.get('new_tokens', '?')} "
                f"| {ms(bt)} | {ms(tt)} | {ratio(tt, bt)} | {ms(bp)} | {ms(tp)} | {ratio(tp, bp)} |")
    check = e["check"]
    check_text = f"{check['max_rel_error']:.1e} (tol {check['tol']:.1e})" if check else "—"
    torch_ttft, torch_step = chosen["torch", "ttft_us"] or {}, chosen["torch", "per_token_us"] or {}
    spread.append(" | ".join([f"| {name}", e["dtype"],
                              *steps(figure("bs", "per_token_us"), chosen["bs", "per_token_us"]),
                              *steps(figure("torch", "per_token_us"), torch_step),
                              ms((torch_ttft.get("ttft_cpu_us") or {}).get("median")),
                              ms((torch_step.get("per_token_cpu_us") or {}).get("median")), check_text]) + " |")
    medians = lambda side, name: " / ".join(ms(r[name]["median"]) for r in e[side] if r.get(name)) or "—"  # noqa: E731
    by_round.append(f"| {name} | {e['dtype']} | {medians('bs', 'ttft_us')} | {medians('torch', 'ttft_us')} "
                    f"| {medians('bs', 'per_token_us')} | {medians('torch', 'per_token_us')} |")

rounds = env.get("knobs", "").rpartition("ROUNDS=")[2] or "1"
print("# blockscope decode vs PyTorch eager decode (DynamicCache), CPU, one thread each\n")
print(f"Measured {env.get('date', '?')} at commit {env.get('commit', '?')} on {env.get('cpu', '?')}.\n")
print("```sh\n" + env.get("command", "?") + "\n# " + env.get("knobs", "") + "\n```\n")
print("ratio = PyTorch time / blockscope time (above 1: blockscope is faster); wall time, medians. "
      "TTFT: the prefill (every layer over the prompt, the cache filled), median over the timed generations; "
      "per-token: one decode step (every layer for one new token per sequence), median over every step of "
      f"every timed generation. Each side's figure is its best round's median (the lowest of {rounds} round(s), "
      "the sides alternating; every round is listed below).\n")
print("| config | blockscope cache | dtype | B | prompt | new tokens | blockscope TTFT (ms) | torch TTFT (ms) "
      "| TTFT ratio | blockscope per-token (ms) | torch per-token (ms) | per-token ratio |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
print("\n".join(main))
print("\nSpread of the steps in each side's best per-token round (ms), tokens/s, the peer's own thread CPU "
      "time (medians, ms), and the peer's check (its decode outputs vs blockscope's: max relative error, tolerance):\n")
print("| config | dtype | blockscope step min–max | first / last step | steps | tokens/s "
      "| torch step min–max | first / last step | steps | tokens/s | torch TTFT CPU | torch step CPU | torch check |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
print("\n".join(spread))
print("\nEvery round's medians (ms), in the order they ran:\n")
print("| config | dtype | blockscope TTFT | torch TTFT | blockscope per-token | torch per-token |")
print("|---|---|---|---|---|---|")
print("\n".join(by_round))
if notes:
    print("\nNotes:\n")
    print("\n".join(f"- {note}" for note in notes))
print("\n## Context\n")
for key in ("cpu", "isa", "load average at start", "load average at end", "threads"):
    if key in env:
        print(f"- {key}: {env[key]}")
for line in lines:
    if line.startswith("OPENBLAS_CORETYPE="):
        print(f"- OpenBLAS environment (both sides): {line.strip()}")
print(f"- blockscope: {env.get('blockscope', '?')}; at the end: {env.get('blockscope at end', '?')}")
if device_line:
    print(f"  - device: {device_line}")
for line in lines:
    if line.startswith("  "):  # blockscope info: its GEMM libraries and this machine's plan key
        print(f"  - {line.strip()}")
if torch_context:
    pools = torch_context["thread_pools"]
    print(f"- PyTorch {torch_context['torch']} (Python {torch_context['python']}): intra-op {pools['intra_op']}, "
          f"inter-op {pools['inter_op']}, OpenBLAS threads {pools['openblas_threads']}, core {pools['openblas_core']}")
for impl in sorted(impls):
    print(f"- PyTorch peer: {impl}")
print("- raw: <row>.r<round>.blockscope.json (blockscope profile --format json), <row>.r<round>.torch.json "
      "(torch_decode_peer.py), logs beside them, environment.txt, rows.txt (each run's exit statuses)")
EOF
echo "decode_side_by_side: wrote $out/decode_side_by_side.md" >&2
