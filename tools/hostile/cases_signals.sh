# Signals surface. Expected (README exit codes, ARCHITECTURE "Signals"): SIGINT/SIGTERM/SIGHUP/
# SIGPIPE stop within a second on the CPU (between ops, decode tokens, reference blocks, 1 MiB
# I/O chunks), stderr acknowledges at once ("stopping within a second"), the command unwinds
# (temporaries and finished outputs removed, said on stderr) and exits 130/143/129/141; a
# second signal ends it at once. Checked: rc, latency, message, leftovers in the case dir.
LONG="$B profile $TINY --set profile.schedule.active=100000"
OUTS="--save s.json --trace t.json --report r.html"
LEFT='cat sig.res 2>/dev/null; ls -A | grep -v "^sig\.\(err\|res\)$" | tr "\n" " "; grep -o "interrupted by [A-Z]*[^;]*" sig.err | head -1; grep -c "stopping within a second" sig.err'
GXL="$C/blocks/gpt2-xl.yaml --dtype f32 --set input.batch=1 --set input.seq_len=64"

c S01 signals "SIGINT during profile steps: 130 in <1 s, said, no output/temp" \
  '' "AFTER=1 sig INT '/\\[1\\/2\\] base/' $LONG $OUTS" "$LEFT"
c S02 signals "SIGTERM during profile steps: 143, no output/temp" \
  '' "AFTER=1 sig TERM '/\\[1\\/2\\] base/' $LONG $OUTS" "$LEFT"
c S03 signals "SIGHUP during profile steps: 129, no output/temp" \
  '' "AFTER=1 sig HUP '/\\[1\\/2\\] base/' $LONG $OUTS" "$LEFT"
c S04 signals "SIGPIPE: profile | head -1, with --save: blockscope 141, save removed, no temp" \
  '' "$B profile $TINY --set profile.schedule.active=2 --save s.json 2>sig.err | head -1 >/dev/null; echo rc=\${PIPESTATUS[0]}" "$LEFT; cat $R/S04.out"
c S05 signals "SIGPIPE: profile --format json | head -c 10: 141" \
  '' "$B profile $TINY --set profile.schedule.active=2 --format json 2>sig.err | head -c 10 >/dev/null; echo rc=\${PIPESTATUS[0]}" "cat $R/S05.out; $LEFT"
c S06 signals "SIGPIPE: check | head -1: 141" \
  '' "$B check $LLAMA 2>sig.err | head -1 >/dev/null; echo rc=\${PIPESTATUS[0]}" "cat $R/S06.out"
c S07 signals "SIGPIPE on stderr (2>&1 | head -1) during long steps: 141 soon, no output/temp" \
  '' "$LONG $OUTS 2>&1 | head -1 >/dev/null; echo rc=\${PIPESTATUS[0]}" "cat $R/S07.out; ls -A"
c S08 signals "SIGINT twice quickly during steps with outputs: ends at once (130 by signal); temporaries?" \
  '' "TWICE=0.05 AFTER=1 sig INT '/\\[1\\/2\\] base/' $LONG $OUTS" "$LEFT"
c S09 signals "SIGINT while the config is read from a stalled stdin: 130 within 1 s" \
  '' "(sleep 30; cat $TINY) | { AFTER=0 sig INT 1 $B run -; }" "$LEFT"
c S10 signals "SIGINT during weight init (llama-3-8b block, 640 MiB): 130 within 1 s" \
  '' "AFTER=0.5 sig INT '/building the workload/' $B run $C/blocks/llama-3-8b.yaml --set input.seq_len=8 --set input.batch=1 --set run.warmup=0 --set run.iters=1" "$LEFT"
c S11 signals "SIGINT during warm-up (run.warmup=100000): 130 within 1 s" \
  '' "AFTER=1 sig INT '/\\[1\\/2\\] base/' $B run $TINY --set run.warmup=100000 --trace t.json" "$LEFT"
c S12 signals "SIGINT during check's float64 reference (gpt2-small S=256): 130 within 1 s" \
  '' "AFTER=0.5 sig INT '/computing the float64 reference/' $B check $C/blocks/gpt2-small.yaml --set input.seq_len=256 --dump d.st" "$LEFT"
c S13 signals "SIGTERM during check's path runs: 143 within 1 s" \
  '' "AFTER=0.3 sig TERM '/\\[2\\/24\\]/' $B check $C/blocks/gpt2-small.yaml --set input.seq_len=64" "$LEFT"
c S14 signals "SIGINT during decode tokens (new_tokens=3000): 130 within 1 s" \
  '' "AFTER=1 sig INT '/\\[1\\/2\\] base/' $B run $DEC --set decode.new_tokens=3000 --set run.warmup=0" "$LEFT"
c S15 signals "SIGINT while the trace (big) is being finished/written: 130, no trace, no temp" \
  '' "AFTER=0 sig INT '/\\[2\\/2\\].*done/' $B profile $TINY --set profile.schedule.active=3000 --trace t.json" "$LEFT; ls -la"
c S16 signals "SIGTERM while --save files (big) are written: 143, none kept, no temp" \
  '' "AFTER=0 sig TERM '/\\[2\\/2\\].*done/' $B profile $TINY --set profile.schedule.active=3000 --save s.json" "$LEFT"
c S17 signals "SIGINT while --dump (gpt2-xl block, ~120 MB) is written: 130, no dump, no temp" \
  '' "AFTER=0.05 sig INT '/\\[2\\/2\\].*done/' $B run $GXL --set run.iters=1 --set run.warmup=0 --dump d.st" "$LEFT"
c S18 signals "SIGINT during diff of two large saved profiles: 130 within 1 s" \
  "$B profile $TINY --set profile.schedule.active=3000 --save s.json >/dev/null 2>&1" "AFTER=0 sig INT 0.3 $B diff s.json s.attention-naive_linear-naive_mlp-naive.json" "grep -o 'interrupted by [A-Z]*[^;]*' sig.err; ls -A"
c S19 signals "SIGTERM during report from large saved profiles: 143, no report, no temp" \
  "$B profile $TINY --set profile.schedule.active=3000 --save s.json >/dev/null 2>&1" "AFTER=0 sig TERM 0.5 $B report s.json s.attention-naive_linear-naive_mlp-naive.json -o r.html" "ls -A"
c S20 signals "SIGINT during info --remeasure-peaks: 130, peak cache unchanged and valid, no temp" \
  'echo "{}" > k.json' "AFTER=0 BLOCKSCOPE_PEAK_CACHE=\$D/k.json sig INT 0.3 $B info --remeasure-peaks" 'cat k.json; ls -A'
c S21 signals "SIGINT during GEMM plan timing (fresh plan cache, llama-3-8b block shapes): 130 within 1 s, cache valid or absent, no temp" \
  '' "AFTER=0.5 BLOCKSCOPE_PLAN_CACHE=\$D/p.json sig INT '/\\[1\\/3\\] base/' $B run $C/blocks/llama-3-8b.yaml --dtype f32 --set input.seq_len=8 --set input.batch=1 --set run.warmup=0 --set run.iters=1" "$LEFT; python3 -c 'import json;json.load(open(\"p.json\"));print(\"valid\")' 2>&1 | tail -1"
c S22 signals "SIGINT 0.02 s after start (before/at handler install): 130, nothing left" \
  '' "AFTER=0 sig INT 0.02 $LONG $OUTS" "$LEFT"
c S23 signals "SIGSTOP, SIGCONT, then SIGINT during steps: 130" \
  '' "$LONG $OUTS 2>sig.err & p=\$!; sleep 1; kill -STOP \$p; sleep 0.5; kill -CONT \$p; sleep 0.2; kill -INT \$p; wait \$p; echo rc=\$?" "$LEFT"
c S24 signals "Ctrl-C to the pipeline's process group (profile | tee log): 130, no outputs" \
  '' "set -m; ( $LONG $OUTS 2>sig.err | tee log >/dev/null; echo rc=\${PIPESTATUS[0]} > rc ) & sleep 1.5; kill -INT -\$!; wait; cat rc" "$LEFT"
c S25 signals "SIGTERM during run --trace's profiling phase after timing: 143, no trace" \
  '' "AFTER=0 sig TERM '/\\[2\\/2\\].*done/' $B run $TINY --set profile.schedule.active=100000 --trace t.json" "$LEFT"
c S26 signals "SIGQUIT (not handled, undocumented) during steps with outputs: dies 131; temporaries left?" \
  '' "AFTER=1 sig QUIT '/\\[1\\/2\\] base/' $LONG $OUTS" "ls -A"
c S27 signals "SIGTERM twice during --dump writing: ends at once; temporary left?" \
  '' "TWICE=0.01 AFTER=0.05 sig TERM '/\\[2\\/2\\].*done/' $B run $GXL --set run.iters=1 --set run.warmup=0 --dump d.st" "ls -A"
c S28 signals "SIGINT during the 2nd variant after the trace file was opened at start: 130, trace temp removed" \
  '' "AFTER=0.5 sig INT '/\\[2\\/2\\]/' $B profile $TINY --set profile.schedule.active=100000 --trace t.json" "$LEFT"
c S29 signals "SIGHUP during check's reference: 129" \
  '' "AFTER=0.3 sig HUP '/computing the float64 reference/' $B check $C/blocks/gpt2-small.yaml --set input.seq_len=256" "$LEFT"
c S30 signals "SIGINT while config (1 GB) is read from stdin: 130 quickly (or size refusal 2)" \
  '' "head -c 1000000000 /dev/zero | { AFTER=0 sig INT 0.3 $B run -; }" "$LEFT"
c S31 signals "SIGINT while --trace goes to a FIFO whose reader holds it open but stopped reading: 130 within 1 s" \
  'mkfifo f.json' "(exec 3<f.json; sleep 60) & sleep 0.2; AFTER=0 sig INT 3 $B profile $TINY --set profile.schedule.active=3000 --trace f.json" "$LEFT"
c S32 signals "SIGINT while stdout (73 KB of JSON) is a pipe whose reader stalls: 130 within 1 s" \
  '' "AFTER=0 sig INT 2 $B profile $TINY --set profile.schedule.active=2 --format json | (sleep 40)" "$LEFT"
c S33 signals "SIGINT right after variant 1 of a 30000-step profile (tables/summaries being built): 130 within 1 s" \
  '' "AFTER=0 sig INT '/\\[1\\/2\\] base.*done/' $B profile $TINY --set profile.schedule.active=30000 --save s.json" "$LEFT"
c S34 signals "SIGPIPE then SIGTERM: check | reader that exits after 1.5 s, SIGTERM 1 s later: exits (141 or 143), nothing left" \
  '' "sh -c 'echo \$\$ > pid; exec $B check $C/blocks/gpt2-small.yaml --set input.seq_len=64 --dump d.st 2>sig.err' | (sleep 1.5; head -c1 >/dev/null) & sleep 2.5; kill -TERM \$(cat pid); wait; sleep 0.5; echo done" "tail -2 sig.err; ls -A"
