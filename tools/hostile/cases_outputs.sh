# Outputs surface (sourced by run_cases.sh). Expected behaviour per README/ARCHITECTURE
# "Reliability: outputs": path problems exit 2 before any work; failing writes exit 3; nothing
# half-written, no .tmp.* left; foreign files replaced only with --force; devices/FIFOs in place.
P="$B profile $TINY --set profile.schedule.active=1"

c O01 outputs "foreign file at --save, no --force: exit 2, file untouched" \
  'echo "my notes" > s.json' "$P --save s.json" 'cat s.json'
c O02 outputs "foreign file at --save with --force: exit 0, replaced by a profile" \
  'echo "my notes" > s.json' "$P --save s.json --force" 'head -c 40 s.json; ls -a'
c O03 outputs "--trace is a directory: exit 2" \
  'mkdir t.json' "$P --trace t.json" 'ls -ld t.json'
c O04 outputs "--trace is a directory with --force: still exit 2" \
  'mkdir t.json' "$P --trace t.json --force" 'ls -ld t.json'
c O05 outputs "--trace symlink to foreign file, no --force: exit 2, target untouched" \
  'echo notes > target.txt; ln -s target.txt t.json' "$P --trace t.json" 'cat target.txt; ls -l t.json'
c O06 outputs "--trace symlink to foreign file with --force: exit 0, target written, link kept" \
  'echo notes > target.txt; ln -s target.txt t.json' "$P --trace t.json --force" 'head -c 20 target.txt; echo; ls -l t.json | cut -c1-10'
c O07 outputs "--trace dangling symlink (target in existing dir): exit 0, target created, link kept" \
  'ln -s real.json t.json' "$P --trace t.json" 'ls -l | cut -c1-10,40-; head -c 15 real.json'
c O08 outputs "--trace dangling symlink into a missing directory: exit 2 before work" \
  'ln -s nodir/real.json t.json' "$P --trace t.json" 'ls -la'
c O09 outputs "--save in a nonexistent directory: exit 2 before work" \
  '' "$P --save nodir/s.json" 'ls -a'
c O10 outputs "--save whose directory is a regular file: exit 2" \
  'echo x > f' "$P --save f/s.json" 'cat f'
c O11 outputs "--save and --trace the same file: exit 2 (one would overwrite the other)" \
  '' "$P --save x.json --trace x.json" 'ls -a'
c O12 outputs "--trace same file as --save via ./ and ../ spelling: exit 2" \
  'mkdir sub' "$P --save x.json --trace sub/../x.json" 'ls -a'
c O13 outputs "--save equal to the input config (a copy): exit 2, config intact" \
  'cp $TINY cfg.yaml' "$B profile cfg.yaml --save cfg.yaml" 'cmp cfg.yaml $TINY && echo intact'
c O14 outputs "--dump is a hard link to the config: exit 2, config intact" \
  'cp $TINY cfg.yaml; ln cfg.yaml hl.st' "$B run cfg.yaml --dump hl.st" 'cmp cfg.yaml $TINY && echo intact'
c O15 outputs "--report is a symlink to the config, --force: exit 2 (input), config intact" \
  'cp $TINY cfg.yaml; ln -s cfg.yaml r.html' "$B profile cfg.yaml --report r.html --force" 'cmp cfg.yaml $TINY && echo intact'
c O16 outputs "--trace whose variant file (t.<label>.json)... trace is one file: --save variant path equals --trace: exit 2" \
  '' "$P --save a.json --trace a.attention-naive_linear-naive_mlp-naive.json" 'ls -a'
c O17 outputs "--save variant path is the config: exit 2, config intact" \
  'cp $TINY a.attention-naive_linear-naive_mlp-naive.json' "$B profile a.attention-naive_linear-naive_mlp-naive.json --set profile.schedule.active=1 --save a.json" 'cmp a.attention-naive_linear-naive_mlp-naive.json $TINY && echo intact'
c O18 outputs "--save name of 255 bytes (variant path then longer): exit 2 before work naming the length" \
  '' "$P --save \$(printf 'a%.0s' {1..250}).json" 'ls -a | wc -l'
c O19 outputs "--trace name of exactly 255 bytes: exit 0, file written, no temp" \
  '' "$P --trace \$(printf 'b%.0s' {1..250}).json" 'ls | grep -c bbbb'
c O20 outputs "--trace name of 256 bytes: exit 2" \
  '' "$P --trace \$(printf 'b%.0s' {1..251}).json" 'ls -a | wc -l'
c O21 outputs "--trace with a newline in the name: exit 0; stderr escapes it" \
  '' "$P --trace \$'a\nb.json'" 'ls | od -c | head -2'
c O22 outputs "--trace with ESC control chars in name: exit 0; stderr shows \\x1b, never raw ESC" \
  '' "$P --trace \$'\e[31mred.json'" 'grep -c $(printf "\x1b") $R/O22.err; grep -o "x1b.*red.json" $R/O22.err'
c O23 outputs "--save with a unicode name: exit 0, written as given" \
  '' "$P --save 'prøfïle-日本.json'" 'ls'
c O24 outputs "disk full (64k tmpfs) on --trace (>64k): exit 3, no trace, no temporary, message names the file" \
  'mkdir full; mount -t tmpfs -o size=64k tmpfs full' "$P --trace full/t.json" 'ls -la full; umount full'
c O25 outputs "disk full on the 2nd of --save's files: exit 3, first removed again and said" \
  'mkdir full; mount -t tmpfs -o size=36k tmpfs full' "$P --save full/s.json" 'ls -la full; umount full'
c O26 outputs "disk full on --report after --trace elsewhere succeeded: exit 3, trace removed, said" \
  'mkdir full; mount -t tmpfs -o size=64k tmpfs full' "$P --trace t.json --report full/r.html" 'ls -a . full; umount full'
c O27 outputs "disk full with --dump (safetensors > 64k): exit 3, nothing left" \
  'mkdir full; mount -t tmpfs -o size=64k tmpfs full' "$B run $TINY --dump full/d.safetensors" 'ls -la full; umount full'
c O28 outputs "read-only file system: exit 2 before any work" \
  'mkdir ro; mount -t tmpfs -o size=1m tmpfs ro; mount -o remount,ro ro' "$P --save ro/s.json" 'ls -la ro; umount ro'
c O29 outputs "read-only fs, existing profile there: exit 2, profile intact" \
  'mkdir ro; mount -t tmpfs -o size=1m tmpfs ro; echo "{\"format\": \"blockscope-profile\"}" > ro/s.json; mount -o remount,ro ro' "$P --save ro/s.json" 'cat ro/s.json; umount ro'
c O30 outputs "/dev/full as --trace: exit 3 naming the trace; /dev/full still a device" \
  '' "$P --trace /dev/full" 'ls -l /dev/full | cut -c1-10'
c O31 outputs "/dev/full as --dump: exit 3" \
  '' "$B run $TINY --dump /dev/full" 'ls -l /dev/full | cut -c1-10'
c O32 outputs "/dev/null as --trace and --save: exit 0 (written to the device); /dev/null intact" \
  '' "$P --trace /dev/null" 'ls -l /dev/null | cut -c1-10'
c O33 outputs "'-' as --trace: exit 2 (stdout carries the tables)" \
  '' "$P --trace -" 'ls -a'
c O34 outputs "/dev/stdout as --save while stdout is a file: exit 2 (it is standard output)" \
  '' "$P --save /dev/stdout" 'ls -a'
c O35 outputs "/dev/stdout as --trace while stdout is a pipe: exit 2" \
  '' "$P --trace /dev/stdout | cat >/dev/null; exit \${PIPESTATUS[0]}" 'ls -a'
c O36 outputs "FIFO with no reader as --trace: exit 2 before work, no hang" \
  'mkfifo f.json' "$P --trace f.json" 'ls -l f.json | cut -c1-10'
c O37 outputs "FIFO with a reader as --trace: exit 0, reader gets the trace, FIFO stays" \
  'mkfifo f.json' "(timeout 20 cat f.json > got.json &) ; sleep 0.3; $P --trace f.json; rc=\$?; sleep 0.3; exit \$rc" 'ls -l f.json | cut -c1-10; head -c 20 got.json'
c O38 outputs "output inside /proc: exit 2" \
  '' "$P --trace /proc/t.json" ''
c O39 outputs "--save ending with / : exit 2" \
  '' "$P --save out/" 'ls -a'
c O40 outputs "empty --save value: exit 2 (usage)" \
  '' "$P --save ''" ''
c O41 outputs "existing blockscope HTML report at --report: replaced without --force, exit 0" \
  "$B profile $TINY --set profile.schedule.active=1 --report r.html >/dev/null 2>&1" "$P --report r.html" 'ls -a'
c O42 outputs "existing empty file at --save: replaced without --force" \
  ': > s.json' "$P --save s.json" 'head -c 30 s.json'
c O43 outputs "read-only (0444) foreign file, --force, as root: replaced? mode kept?" \
  'echo notes > s.json; chmod 444 s.json' "$P --save s.json --force" 'ls -l s.json | cut -c1-10'
c O44 outputs "existing own profile with mode 0600: replaced; mode should be kept (not widened)" \
  "$B profile $TINY --set profile.schedule.active=1 --save s.json >/dev/null 2>&1; chmod 600 s.json" "$P --save s.json" 'ls -l s.json | cut -c1-10'
c O45 outputs "a user JSON that merely mentions \"format\": \"blockscope-profile\" deep inside: refused without --force" \
  'printf "{\"notes\": [\"keep me\", {\"quote\": {\"format\": \"blockscope-profile\"}}]}\n" > s.json' "$P --save s.json" 'cat s.json'
c O46 outputs "a user file starting with 8 small bytes + '{' (looks like safetensors): refused without --force" \
  'printf "\x02\x00\x00\x00\x00\x00\x00\x00{} my precious notes\n" > d.st' "$B run $TINY --dump d.st" 'tail -c 20 d.st'
c O47 outputs "report -o equal to one of its input profiles: exit 2, profile intact" \
  "$B profile $TINY --set profile.schedule.active=1 --save s.json >/dev/null 2>&1; md5sum s.json > m" "$B report s.json -o s.json" 'md5sum -c m'
c O48 outputs "report -o foreign file without --force: exit 2" \
  "$B profile $TINY --set profile.schedule.active=1 --save s.json >/dev/null 2>&1; echo notes > r.html" "$B report s.json -o r.html" 'cat r.html'
c O49 outputs "report -o /dev/full: exit 3" \
  "$B profile $TINY --set profile.schedule.active=1 --save s.json >/dev/null 2>&1" "$B report s.json -o /dev/full" ''
c O50 outputs "stdout is /dev/full (tables cannot be printed): non-zero exit (3), not 0" \
  '' "$P > /dev/full" ''
c O51 outputs "stdout closed (>&-): non-zero exit or ok, no crash" \
  '' "$P >&-" ''
c O52 outputs "profile.trace (config key via --set) naming the config itself: exit 2, config intact" \
  'cp $TINY cfg.yaml' "$B profile cfg.yaml --set profile.trace=cfg.yaml" 'cmp cfg.yaml $TINY && echo intact'
c O53 outputs "two profiles writing the same --save at once: both exit 0, file is one complete profile, no temp" \
  '' "$P --save s.json >/dev/null 2>e1 & $P --save s.json >/dev/null 2>e2 & wait %1; a=\$?; wait %2; echo rc \$a \$?" 'python3 -c "import json;json.load(open(\"s.json\"));print(\"valid\")"'
c O54 outputs "symlink loop at --trace: exit 2, links intact" \
  'ln -s b a.json; ln -s a.json b' "$P --trace a.json" 'ls -l | cut -c1-10,40-'
c O55 outputs "--save into a directory reached through a symlinked dir: exit 0" \
  'mkdir real; ln -s real link' "$P --save link/s.json" 'ls real'
c O56 outputs "run --trace to existing foreign file: exit 2 before timing" \
  'echo notes > t.json' "$B run $TINY --trace t.json" 'cat t.json'
c O57 outputs "check --dump over a foreign file: exit 2 before any check" \
  'echo notes > d.st' "$B check $LLAMA --dump d.st" 'cat d.st'
c O58 outputs "--dump name with 255 bytes: exit 0 and temp shortened (no ENAMETOOLONG)" \
  '' "$B run $TINY --dump \$(printf 'd%.0s' {1..252}).st" 'ls | grep -c ddd'
c O59 outputs "output whose directory is unreadable but writable (0333) as root: works" \
  'mkdir d; chmod 333 d' "$P --save d/s.json" 'ls d'
c O60 outputs "--report to a path whose parent is a FIFO: exit 2" \
  'mkfifo p' "$P --report p/r.html" 'ls -l p | cut -c1-10'
c O61 outputs "--trace t.json while a directory sits at t.<variant>.json (never written: one trace holds every variant): exit 0" \
  'mkdir t.attention-naive_linear-naive_mlp-naive.json' "$P --trace t.json" 'ls'
c O62 outputs "--trace t.json while a foreign file sits at t.<variant>.json: exit 0, that file untouched" \
  'echo notes > t.attention-naive_linear-naive_mlp-naive.json' "$P --trace t.json" 'ls; cat t.attention-naive_linear-naive_mlp-naive.json'
c O63 outputs "stdout closed while writing --trace/--save: outputs must stay valid JSON (fd 1 reuse)" \
  '' "$P --trace t.json --save s.json >&-" 'for f in t.json s.json s.attention-naive_linear-naive_mlp-naive.json; do python3 -c "import json,sys;json.load(open(sys.argv[1]));print(sys.argv[1],\"valid\")" $f 2>&1 | tail -1; done'
c O64 outputs "FIFO with a reader that reopens (while loop): exit 0, reader gets a trace" \
  'mkfifo f.json' "(for i in 1 2; do timeout 5 cat f.json >> got.json; done &) ; sleep 0.3; timeout -k 2 30 $P --trace f.json; rc=\$?; sleep 0.3; exit \$rc" 'ls -l got.json | cut -c1-10,24-32; head -c 20 got.json'
