# mpirun (tensor parallelism on CPU ranks). Expected (ARCHITECTURE "Tensor parallelism", PROFILING
# "What mpirun's ranks guarantee"): ranks agree before any work (exit 2 naming each difference);
# parallel.tensor must equal the rank count and divide heads/kv heads/d_ff (exit 2); rank-derived
# outputs checked first; a failing rank tells the others, no rank waits forever; signal to a rank
# -> mpirun ends with that rank's 143/130; signal to mpirun -> non-zero, nothing left; SIGKILL of
# a rank: mpirun ends the others (rank 0's temporaries may remain); BLOCKSCOPE_COLLECTIVE_TIMEOUT
# a positive decimal (else exit 2).
M2="$MPI $B"
TP2="--set parallel.tensor=2"
W=$H/rankwrap.sh
export NPLANS='python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(\"plans:\",sum(len(v) for v in d.values()))"'
LONGTP="profile $TINY $TP2 --set profile.schedule.active=100000"

c M01 mpirun "profile tiny-gpt2 TP=2 with --save/--trace: 0, rank1 profile beside, per-rank tables" \
  '' "$M2 profile $TINY $TP2 --set profile.schedule.active=2 --save s.json --trace t.json" 'ls; grep -c "rank 1" $R/M01.out'
c M02 mpirun "mpirun -np 2 without parallel.tensor: exit 2 naming the fix" \
  '' "$M2 run $TINY" ''
c M03 mpirun "-np 3 with parallel.tensor=2: exit 2" \
  '' "mpirun --oversubscribe -np 3 $B run $TINY $TP2" ''
c M04 mpirun "-np 3, parallel.tensor=3 (does not divide 4 heads): exit 2" \
  '' "mpirun --oversubscribe -np 3 $B run $TINY --set parallel.tensor=3" ''
c M05 mpirun "-np 4 TP=4 tiny-gpt2 check: exit 0" \
  '' "mpirun --oversubscribe -np 4 $B check $TINY --set parallel.tensor=4" 'tail -3 $R/M05.out'
c M06 mpirun "-np 4 TP=4 tiny-llama (2 kv heads): exit 2 naming kv heads" \
  '' "mpirun --oversubscribe -np 4 $B run $LLAMA --set parallel.tensor=4" ''
c M07 mpirun "-np 3 TP=3 on a config whose heads/d_ff divide by 3 (d_model 96, 6 heads, d_ff 384): check 0" \
  '' "mpirun --oversubscribe -np 3 $B check $TINY --set parallel.tensor=3 --set model.d_model=96 --set model.n_heads=6 --set model.d_ff=384" 'tail -2 $R/M07.out'
c M08 mpirun "MPMD: rank 1 another --set (n_layers): exit 2 on every rank naming the key" \
  '' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 $B run $TINY $TP2 --set model.n_layers=3" ''
c M09 mpirun "MPMD: rank 1 another config file with identical content: exit 0" \
  'cp $TINY copy.yaml' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 $B run copy.yaml $TP2" ''
c M10 mpirun "MPMD: rank 1 --format csv: exit 2 naming --format" \
  '' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 $B run $TINY $TP2 --format csv" ''
c M11 mpirun "MPMD: rank 1 --threads 2: exit 2" \
  '' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 $B run $TINY $TP2 --threads 2" ''
c M12 mpirun "MPMD: rank 1 with OMP_NUM_THREADS=2 env only (same effective flags?): exit 0 or 2; per-rank threads said?" \
  '' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 -x OMP_NUM_THREADS=2 $B run $TINY $TP2" 'grep -i thread $R/M12.out | head -2'
c M13 mpirun "MPMD: rank 1 runs 'check', rank 0 'run': exit 2 naming the command" \
  '' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 $B check $TINY $TP2" ''
c M14 mpirun "MPMD: rank 1's command line does not parse: exit 2, no hang" \
  '' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 $B run $TINY $TP2 --bogus" ''
c M15 mpirun "MPMD: rank 1 'info', rank 0 'run': exit 2 or clear error, no hang" \
  '' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 $B info" ''
c M16 mpirun "MPMD: rank 1 'diff' of two files, rank 0 'profile': no hang" \
  "$B profile $TINY --set profile.schedule.active=1 --save s.json >/dev/null 2>&1" "mpirun --oversubscribe -np 1 $B profile $TINY $TP2 : -np 1 $B diff s.json s.json" ''
c M17 mpirun "COLLECTIVE_TIMEOUT=0: exit 2 naming the variable" \
  '' "BLOCKSCOPE_COLLECTIVE_TIMEOUT=0 $M2 run $TINY $TP2" ''
c M18 mpirun "COLLECTIVE_TIMEOUT=-5: exit 2" \
  '' "BLOCKSCOPE_COLLECTIVE_TIMEOUT=-5 $M2 run $TINY $TP2" ''
c M19 mpirun "COLLECTIVE_TIMEOUT=abc: exit 2" \
  '' "BLOCKSCOPE_COLLECTIVE_TIMEOUT=abc $M2 run $TINY $TP2" ''
c M20 mpirun "COLLECTIVE_TIMEOUT=1e3 (exponent, not decimal per docs): exit 2" \
  '' "BLOCKSCOPE_COLLECTIVE_TIMEOUT=1e3 $M2 run $TINY $TP2" ''
c M21 mpirun "COLLECTIVE_TIMEOUT=99999999999999999999999 (huge): exit 0" \
  '' "BLOCKSCOPE_COLLECTIVE_TIMEOUT=99999999999999999999999 $M2 run $TINY $TP2" ''
c M22 mpirun "COLLECTIVE_TIMEOUT=0.000001 (tiny): exit 3 with the timeout message, or 0; no hang" \
  '' "BLOCKSCOPE_COLLECTIVE_TIMEOUT=0.000001 $M2 run $TINY $TP2" ''
c M23 mpirun "COLLECTIVE_TIMEOUT garbage on rank 1 only: exit 2 on both, no hang" \
  '' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 -x BLOCKSCOPE_COLLECTIVE_TIMEOUT=abc $B run $TINY $TP2" ''
c M24 mpirun "COLLECTIVE_TIMEOUT=2 and rank 1 SIGSTOPped mid-run: rank 0 exits 3 within ~2 s of waiting; mpirun ends" \
  '' "BLOCKSCOPE_COLLECTIVE_TIMEOUT=2 $MPI $W $B $LONGTP 2>err & sleep 2; kill -STOP \$(cat pid.1); wait %1 2>/dev/null; rc=\$?; kill -CONT \$(cat pid.1) 2>/dev/null; tail -3 err; exit \$rc" ''
c M25 mpirun "SIGKILL to rank 1 mid-steps (with --save/--trace): mpirun ends quickly, non-zero; no hang" \
  '' "$MPI $W $B $LONGTP --save s.json --trace t.json & sleep 2; kill -KILL \$(cat pid.1); wait %1; echo mpirun_rc=\$?" 'ls -A'
c M26 mpirun "SIGTERM to rank 1 mid-steps: mpirun 143; rank 0 names rank 1; nothing left" \
  '' "$MPI $W $B $LONGTP --save s.json --trace t.json & sleep 2; kill -TERM \$(cat pid.1); wait %1; echo mpirun_rc=\$?" 'ls -A'
c M27 mpirun "SIGTERM to rank 0 mid-steps: mpirun 143; nothing left" \
  '' "$MPI $W $B $LONGTP --save s.json --trace t.json & sleep 2; kill -TERM \$(cat pid.0); wait %1; echo mpirun_rc=\$?" 'ls -A'
c M28 mpirun "SIGINT to rank 1: mpirun 130" \
  '' "$MPI $W $B $LONGTP & sleep 2; kill -INT \$(cat pid.1); wait %1; echo mpirun_rc=\$?" 'ls -A'
c M29 mpirun "SIGTERM to mpirun: non-zero, both ranks say interrupted, nothing left" \
  '' "$MPI $W $B $LONGTP --save s.json --trace t.json & sleep 2; kill -TERM %1; wait %1; echo mpirun_rc=\$?" 'ls -A'
c M30 mpirun "SIGINT twice quickly to mpirun: ends, nothing hangs (orphan ranks?)" \
  '' "$MPI $W $B $LONGTP --save s.json & sleep 2; kill -INT %1; sleep 0.05; kill -INT %1; wait %1; echo mpirun_rc=\$?; sleep 1; for p in pid.*; do kill -0 \$(cat \$p) 2>/dev/null && echo ALIVE \$p; done" 'ls -A'
c M31 mpirun "SIGHUP to rank 1: mpirun 129" \
  '' "$MPI $W $B $LONGTP & sleep 2; kill -HUP \$(cat pid.1); wait %1; echo mpirun_rc=\$?" ''
c M32 mpirun "SIGKILL to rank 0 while it writes a big trace: mpirun ends, non-zero, no hang (temp may remain, documented)" \
  '' "$MPI $W $B profile $TINY $TP2 --set profile.schedule.active=3000 --trace t.json 2>err & until grep -q '2/2' err 2>/dev/null; do sleep 0.05; done; sleep 0.3; kill -KILL \$(cat pid.0); wait %1; echo mpirun_rc=\$?" 'ls -A'
c M33 mpirun "--save s.json where s.rank1.json is a foreign file: exit 2 before work, file intact" \
  'echo notes > s.rank1.json' "$M2 profile $TINY $TP2 --set profile.schedule.active=1 --save s.json" 'cat s.rank1.json; ls'
c M34 mpirun "--save s.json where s.rank1.json is a directory: exit 2 before work" \
  'mkdir s.rank1.json' "$M2 profile $TINY $TP2 --set profile.schedule.active=1 --save s.json" 'ls'
c M35 mpirun "--save s.json where s.rank1.json is a symlink to the config: exit 2, config intact" \
  'cp $TINY cfg.yaml; ln -s cfg.yaml s.rank1.json' "$M2 profile cfg.yaml $TP2 --set profile.schedule.active=1 --save s.json" 'cmp cfg.yaml $TINY && echo intact'
c M36 mpirun "--save s.json where the variant's rank-1 file s.<variant>.rank1.json is foreign: exit 2" \
  'echo notes > s.attention-naive_linear-naive_mlp-naive.rank1.json' "$M2 profile $TINY $TP2 --set profile.schedule.active=1 --save s.json" 'cat s.attention-naive_linear-naive_mlp-naive.rank1.json'
c M37 mpirun "--trace equals s.rank1.json of --save: exit 2" \
  '' "$M2 profile $TINY $TP2 --set profile.schedule.active=1 --save s.json --trace s.rank1.json" 'ls'
c M38 mpirun "--save in a 64k tmpfs (rank files overflow): exit 3 on every rank, nothing left, no hang" \
  'mkdir full; mount -t tmpfs -o size=64k tmpfs full' "$M2 profile $TINY $TP2 --set profile.schedule.active=1 --save full/s.json" 'ls -A full; umount full'
c M39 mpirun "--trace /dev/full under mpirun: exit 3, no hang" \
  '' "$M2 profile $TINY $TP2 --set profile.schedule.active=1 --trace /dev/full" ''
c M40 mpirun "run/check/profile with --dump under mpirun: dump written once by rank 0, exit 0" \
  '' "$M2 check $LLAMA $TP2 --dump d.st" 'ls -A'
c M41 mpirun "info under mpirun: printed once, exit 0" \
  '' "$M2 info" 'grep -c "blockscope version" $R/M41.out'
c M42 mpirun "diff under mpirun: printed once, exit 0" \
  "$B profile $TINY --set profile.schedule.active=1 --save s.json >/dev/null 2>&1" "$M2 diff s.json s.attention-naive_linear-naive_mlp-naive.json" 'grep -c "^" $R/M42.out'
c M43 mpirun "report under mpirun: report written once/valid, exit 0, no temp" \
  "$B profile $TINY --set profile.schedule.active=1 --save s.json >/dev/null 2>&1" "$M2 report s.json -o r.html" 'ls -A; grep -c "wrote" $R/M43.err'
c M44 mpirun "report under mpirun onto a foreign file without --force: exit 2 on both, file intact" \
  "$B profile $TINY --set profile.schedule.active=1 --save s.json >/dev/null 2>&1; echo notes > r.html" "$M2 report s.json -o r.html" 'cat r.html'
c M45 mpirun "config from stdin '-' under mpirun (mpirun feeds rank 0 only): exit 2 naming stdin on rank 1, no hang" \
  '' "cat $TINY | $M2 run - $TP2" ''
c M46 mpirun "a decode workload with parallel.tensor=2: exit 2 (block/stack only)" \
  '' "$M2 run $DEC $TP2" ''
c M47 mpirun "sequence_parallel with tokens not divisible by 2 (batch 1, seq 17): exit 2 or correct check" \
  '' "$M2 check $TINY $TP2 --set parallel.sequence_parallel=true --set input.batch=1" 'tail -2 $R/M47.out'
c M48 mpirun "-np 1 with parallel.tensor=2: exit 2 (rank count != N)" \
  '' "mpirun -np 1 $B run $TINY $TP2" ''
c M49 mpirun "parallel.tensor=2 without mpirun: exit 2 naming the mpirun line" \
  '' "$B run $TINY $TP2" ''
c M50 mpirun "mpirun profile | head -1 (SIGPIPE on rank 0): ends, no hang, non-zero, nothing left" \
  '' "$M2 profile $TINY $TP2 --set profile.schedule.active=2 --save s.json 2>err | head -1 >/dev/null; echo rc=\${PIPESTATUS[0]}" 'ls -A; tail -2 err'
c M51 mpirun "both ranks plan into one fresh plan cache at once: every entry kept, valid JSON" \
  '' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $M2 run $LLAMA $TP2 >/dev/null && BLOCKSCOPE_PLAN_CACHE=\$D/q.json $B run $LLAMA --set model.n_heads=2 --set model.n_kv_heads=1 --set model.d_ff=80 >/dev/null 2>&1" "$NPLANS p.json; ls -A"
c M52 mpirun "rank 1 given --force, rank 0 not, foreign file at --save: exit 2 (rank 0 writes) or agreement error" \
  'echo notes > s.json' "mpirun --oversubscribe -np 1 $B profile $TINY $TP2 --set profile.schedule.active=1 --save s.json : -np 1 $B profile $TINY $TP2 --set profile.schedule.active=1 --save s.json --force" 'cat s.json'
c M53 mpirun "rank 1 given another BLOCKSCOPE_CPU_PEAK_TFLOPS (different % of peak per rank): accepted or refused?" \
  '' "mpirun --oversubscribe -np 1 $B profile $TINY $TP2 --set profile.schedule.active=1 : -np 1 -x BLOCKSCOPE_CPU_PEAK_TFLOPS=500 $B profile $TINY $TP2 --set profile.schedule.active=1" ''
c M54 mpirun "rank 1 forced cpu.gemm=builtin via --set: exit 2 naming cpu.gemm" \
  '' "mpirun --oversubscribe -np 1 $B run $TINY $TP2 : -np 1 $B run $TINY $TP2 --set cpu.gemm=builtin" ''
c M55 mpirun "rank 1 with BLOCKSCOPE_CPU_WEIGHTS=packed env only: run ok; results same?" \
  '' "mpirun --oversubscribe -np 1 $B check $LLAMA $TP2 : -np 1 -x BLOCKSCOPE_CPU_WEIGHTS=packed $B check $LLAMA $TP2" 'tail -2 $R/M55.out'
