# Caches surface: the GEMM plan cache (BLOCKSCOPE_PLAN_CACHE, $XDG_CACHE_HOME/blockscope/
# cpu-gemm-plans.json) and the peak cache (BLOCKSCOPE_PEAK_CACHE, .../cpu-peaks.json).
# Expected (ARCHITECTURE "Reliability", PROFILING "peaks"): a cache is only written over a
# cache of its kind; a device, FIFO or other file is left alone with a note (exit 0); an empty
# file is an empty cache; updates are read-merge-rename under a directory flock (concurrent
# writers keep every entry, no lock file); off/OFF = no cache, empty = unset, relative
# XDG_CACHE_HOME ignored; peak overrides decimal only (else exit 2).
RUNL="$B run $LLAMA"            # plans the tiny Llama's weight GEMMs (writes the plan cache)
PROF="$B profile $TINY --set profile.schedule.active=1"   # needs the peaks (peak cache)
NPLANS='python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(\"plans:\",sum(len(v) for v in d.values()))"'
export NPLANS

c K01 caches "PLAN_CACHE=/dev/null: note, exit 0, /dev/null still a device" \
  '' "BLOCKSCOPE_PLAN_CACHE=/dev/null $RUNL" 'ls -l /dev/null | cut -c1-10; grep -c note $R/K01.err'
c K02 caches "PLAN_CACHE is a FIFO nobody reads: no hang, note, exit 0" \
  'mkfifo p' "BLOCKSCOPE_PLAN_CACHE=\$D/p $RUNL" 'ls -l p | cut -c1-10'
c K03 caches "PLAN_CACHE relative path: used relative to the cwd (or refused like XDG), exit 0" \
  'mkdir sub' "cd sub && BLOCKSCOPE_PLAN_CACHE=rel/plans.json $RUNL" 'find . -type f'
c K04 caches "PLAN_CACHE empty string = unset: the XDG location is used" \
  '' "BLOCKSCOPE_PLAN_CACHE= XDG_CACHE_HOME=\$D/x $RUNL" 'find x -type f'
c K05 caches "PLAN_CACHE=oFf: no cache at all, no file named oFf" \
  '' "BLOCKSCOPE_PLAN_CACHE=oFf XDG_CACHE_HOME=\$D/x $RUNL" 'find . -type f'
c K06 caches "plan cache holding text garbage: left alone with a note, exit 0" \
  'echo "this is not json" > p.json; cp p.json orig' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" 'cmp p.json orig && echo untouched; grep -o "note.*" $R/K06.err | head -1'
c K07 caches "plan cache truncated mid-JSON (crash/copy): note, left alone, exit 0 (re-planned every run?)" \
  'head -c 400 $XDG_CACHE_HOME/blockscope/cpu-gemm-plans.json > p.json; cp p.json orig' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL; BLOCKSCOPE_PLAN_CACHE=\$D/p.json $B info --plans" 'cmp p.json orig && echo untouched; grep -io "note.*" $R/K07.err | head -1; grep -i "plan" $R/K07.out | head -2'
c K08 caches "plan cache of random binary bytes: note, left alone, exit 0" \
  'head -c 4096 /dev/urandom > p.json; cp p.json orig' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" 'cmp p.json orig && echo untouched'
c K09 caches "empty plan cache file: an empty cache, filled, exit 0" \
  ': > p.json' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" "$NPLANS p.json"
c K10 caches "plan cache a 1 GiB sparse file of zeros: bounded time/memory, note, exit 0" \
  'truncate -s 1G p.json' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json /usr/bin/time -f maxrss_kb=%M $RUNL" 'ls -l p.json | cut -c24-36; grep maxrss $R/K10.err'
c K11 caches "plan cache is a symlink to a valid cache elsewhere: target updated, link kept" \
  'mkdir real; echo "{}" > real/p.json; ln -s real/p.json p.json' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" "ls -l p.json | cut -c1-10; $NPLANS real/p.json"
c K12 caches "plan cache is a dangling symlink: the target is created, link kept" \
  'mkdir real; ln -s real/p.json p.json' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" "ls -l p.json | cut -c1-10; ls real"
c K13 caches "plan cache is a symlink loop: note, exit 0, links intact" \
  'ln -s b p.json; ln -s p.json b' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" 'ls -l | cut -c1-10,40-'
c K14 caches "plan cache path is a directory: note, exit 0" \
  'mkdir p.json' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" 'ls -la p.json | head -3'
c K15 caches "plan cache path's parent directories missing: created, exit 0" \
  '' "BLOCKSCOPE_PLAN_CACHE=\$D/a/b/c/p.json $RUNL" 'find . -type f'
c K16 caches "plan cache dir on a read-only fs: note, exit 0, no crash" \
  'mkdir ro; mount -t tmpfs -o size=1m tmpfs ro; mount -o remount,ro ro' "BLOCKSCOPE_PLAN_CACHE=\$D/ro/p.json $RUNL" 'ls -a ro; umount ro'
c K17 caches "plan cache on a full fs: note, exit 0, no temp left, old cache intact" \
  'mkdir full; mount -t tmpfs -o size=4k tmpfs full; echo "{}" > full/p.json; head -c 3000 /dev/zero > full/pad' "BLOCKSCOPE_PLAN_CACHE=\$D/full/p.json $RUNL" 'ls -la full; cat full/p.json; umount full'
c K18 caches "PLAN_CACHE and PEAK_CACHE the same file: one kind kept, the other a note; exit 0; file stays valid JSON" \
  '' "BLOCKSCOPE_PLAN_CACHE=\$D/c.json BLOCKSCOPE_PEAK_CACHE=\$D/c.json $B profile $LLAMA --set profile.schedule.active=1" 'python3 -c "import json;print(list(json.load(open(\"c.json\")).keys())[:3])"; grep -o "note.*" $R/K18.err | head -2'
c K19 caches "PLAN_CACHE pointing at the input config: config untouched, note, exit 0" \
  'cp $LLAMA cfg.yaml' "BLOCKSCOPE_PLAN_CACHE=\$D/cfg.yaml $B run cfg.yaml" 'cmp cfg.yaml $LLAMA && echo intact'
c K20 caches "PEAK_CACHE pointing at a saved profile: profile untouched, note, exit 0" \
  "$B profile $TINY --set profile.schedule.active=1 --save s.json >/dev/null 2>&1; md5sum s.json > m" "BLOCKSCOPE_PEAK_CACHE=\$D/s.json $PROF" 'md5sum -c m'
c K21 caches "2 concurrent writers into a fresh plan cache (different shapes): every entry kept" \
  '' "export BLOCKSCOPE_PLAN_CACHE=\$D/p.json; $RUNL >/dev/null 2>e1 & $B run $TINY >/dev/null 2>e2 & wait; BLOCKSCOPE_PLAN_CACHE=\$D/q.json $RUNL >/dev/null 2>&1; BLOCKSCOPE_PLAN_CACHE=\$D/q.json $B run $TINY >/dev/null 2>&1" "$NPLANS p.json; $NPLANS q.json; ls -a"
c K22 caches "5 concurrent writers, 5 d_model values: every entry kept (compare with sequential)" \
  '' "export BLOCKSCOPE_PLAN_CACHE=\$D/p.json; for d in 64 96 128 160 192; do $B run $LLAMA --set model.d_model=\$d >/dev/null 2>e\$d & done; wait; for d in 64 96 128 160 192; do BLOCKSCOPE_PLAN_CACHE=\$D/q.json $B run $LLAMA --set model.d_model=\$d >/dev/null 2>&1; done" "$NPLANS p.json; $NPLANS q.json; ls -a | tr '\n' ' '"
c K23 caches "peak cache entry with tflops=\"abc\" and gbps=-5: measured again, exit 0, no crash" \
  'echo "{}" > k.json' "BLOCKSCOPE_PEAK_CACHE=\$D/k.json $PROF >/dev/null 2>&1; python3 - <<'PY'
import json; d=json.load(open('k.json'))
for k in d: d[k]['tflops']='abc'; d[k]['gbps']=-5
json.dump(d,open('k.json','w'))
PY
BLOCKSCOPE_PEAK_CACHE=\$D/k.json $PROF" 'head -c 300 k.json; grep -o "peaks [^(]*" $R/K23.out'
c K24 caches "peak cache entry with tflops=1e6 (impossible): measured again and rewritten" \
  'echo "{}" > k.json' "BLOCKSCOPE_PEAK_CACHE=\$D/k.json $PROF >/dev/null 2>&1; python3 -c \"
import json; d=json.load(open('k.json'))
for k in d: d[k]['tflops']=1e6
json.dump(d,open('k.json','w'))\"; BLOCKSCOPE_PEAK_CACHE=\$D/k.json $PROF" 'grep -o "peaks [^(]*" $R/K24.out; grep -o "\"tflops\": [0-9.e+]*" k.json'
c K25 caches "BLOCKSCOPE_CPU_PEAK_TFLOPS=abc: exit 2 naming the variable" \
  '' "BLOCKSCOPE_CPU_PEAK_TFLOPS=abc $PROF" ''
c K26 caches "BLOCKSCOPE_CPU_PEAK_TFLOPS=0: exit 2" \
  '' "BLOCKSCOPE_CPU_PEAK_TFLOPS=0 $PROF" ''
c K27 caches "BLOCKSCOPE_CPU_PEAK_TFLOPS=-1: exit 2" \
  '' "BLOCKSCOPE_CPU_PEAK_TFLOPS=-1 $PROF" ''
c K28 caches "BLOCKSCOPE_CPU_PEAK_GBPS=1e9 (impossible): exit 2" \
  '' "BLOCKSCOPE_CPU_PEAK_GBPS=1000000000 $PROF" ''
c K29 caches "BLOCKSCOPE_CPU_PEAK_TFLOPS=0.5 (plausible): used, exit 0" \
  '' "BLOCKSCOPE_CPU_PEAK_TFLOPS=0.5 $PROF" 'grep -o "peaks [^(]*" $R/K29.out'
c K30 caches "XDG_CACHE_HOME relative: ignored, HOME/.cache used" \
  'mkdir home' "HOME=\$D/home XDG_CACHE_HOME=rel $RUNL" 'find . -type f'
c K31 caches "HOME and XDG_CACHE_HOME unset: no cache, exit 0, nothing in cwd" \
  '' "env -u HOME -u XDG_CACHE_HOME $RUNL" 'find . -type f'
c K32 caches "XDG_CACHE_HOME=/dev/null: note, exit 0" \
  '' "XDG_CACHE_HOME=/dev/null $PROF" 'grep -o "note.*" $R/K32.err | head -2'
c K33 caches "plan cache entry with choice 'nosuch.lib' for this machine: re-planned, exit 0, entry fixed" \
  "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL >/dev/null 2>&1; sed -i 's/\"choice\": \"[a-z.]*\"/\"choice\": \"nosuch.lib\"/' p.json" "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL; BLOCKSCOPE_PLAN_CACHE=\$D/p.json $B info --plans" 'grep -c nosuch p.json'
c K34 caches "another process holds the cache dir's flock for 30 s: waits ~10 s then writes, exit 0" \
  'mkdir c' "flock c sleep 30 & sleep 0.3; BLOCKSCOPE_PLAN_CACHE=\$D/c/p.json $RUNL; rc=\$?; kill %1; exit \$rc" "$NPLANS c/p.json"
c K35 caches "plan cache of 200k nested '[' (deep JSON): no crash, note, exit 0" \
  'python3 -c "print(\"[\"*200000)" > p.json' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" ''
c K36 caches "info --plans with a garbage plan cache: exit 0, says the cache is not one" \
  'echo garbage > p.json' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $B info --plans" 'grep -i "plan" $R/K36.out | head -3'
c K37 caches "info --remeasure-peaks, peak cache dir read-only: peaks printed, note, exit 0" \
  'mkdir ro; mount -t tmpfs -o size=1m tmpfs ro; echo "{}" > ro/k.json; mount -o remount,ro ro' "BLOCKSCOPE_PEAK_CACHE=\$D/ro/k.json $B info --remeasure-peaks" 'cat ro/k.json; umount ro'
c K38 caches "PEAK_CACHE=/dev/full: device left alone (note), exit 0" \
  '' "BLOCKSCOPE_PEAK_CACHE=/dev/full $B info --remeasure-peaks" 'ls -l /dev/full | cut -c1-10'
c K39 caches "plan cache holding other machines' entries only: kept, ours added" \
  'echo "{\"other machine\": {\"shape\": {\"choice\": \"x\"}}}" > p.json' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" 'python3 -c "import json;print(list(json.load(open(\"p.json\")).keys()))" | cut -c1-120'
c K40 caches "plan cache name of 300 bytes: note, exit 0" \
  '' "BLOCKSCOPE_PLAN_CACHE=\$D/\$(printf 'p%.0s' {1..300}) $RUNL" 'ls | wc -l'
c K41 caches "plan cache's directory is a regular file: note, exit 0" \
  'echo x > f' "BLOCKSCOPE_PLAN_CACHE=\$D/f/p.json $RUNL" 'cat f'
c K42 caches "peak cache with a valid JSON array [] (not an object): note, left alone" \
  'echo "[]" > k.json' "BLOCKSCOPE_PEAK_CACHE=\$D/k.json $PROF" 'cat k.json'
c K43 caches "plan cache 0444 as root: rewritten or note; exit 0; mode?" \
  'echo "{}" > p.json; chmod 444 p.json' "BLOCKSCOPE_PLAN_CACHE=\$D/p.json $RUNL" "ls -l p.json | cut -c1-10; $NPLANS p.json"
c K44 caches "PLAN_CACHE=/proc/self/status-like path (unwritable pseudo-fs): note, exit 0" \
  '' "BLOCKSCOPE_PLAN_CACHE=/proc/blockscope-plans.json $RUNL" ''
c K45 caches "peak cache 5 concurrent info --remeasure-peaks on one file: valid JSON, every dtype entry, no temp" \
  '' "for i in 1 2 3 4 5; do BLOCKSCOPE_PEAK_CACHE=\$D/k.json $B info --remeasure-peaks >/dev/null 2>e\$i & done; wait" 'python3 -c "import json;print(len(json.load(open(\"k.json\"))),\"entries\")"; ls -a | tr "\n" " "'
c K46 caches "PLAN_CACHE pointing at a user's JSON made only of objects (tsconfig-like): left alone with a note" \
  'printf "{\"compilerOptions\": {\"strict\": true}}\n" > tsconfig.json; cp tsconfig.json orig' "BLOCKSCOPE_PLAN_CACHE=\$D/tsconfig.json $RUNL" 'cmp tsconfig.json orig && echo untouched || head -c 150 tsconfig.json'
