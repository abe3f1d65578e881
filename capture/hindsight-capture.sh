#!/bin/sh
# hindsight-capture.sh - capture a Hindsight postmortem bundle on a Linux (GPU) host.
#
# POSIX sh (dash, bash, busybox ash). Needs coreutils, awk, tar and gzip; every
# other tool is optional and its absence is recorded in the manifest.
# Read-only on the host: it writes only under the output directory (and raises
# its own oom_score_adj so the kernel kills it before the workload).
# Contract with the analyzer: docs/bundle-format.md. On-call recipe: docs/capture.md.
# shellcheck disable=SC2016 # awk and sh programs are single-quoted on purpose
set -u

CAPTURE_VERSION=0.1.0
FORMAT_VERSION=1
TAB=$(printf '\t')
NL='
'

usage() {
    cat <<'EOF'
Usage: hindsight-capture.sh [-d DURATION_S] [-i INTERVAL_S] [-o OUT_DIR] [--pid PID]...
                            [--cgroup PATH]... [--no-bpf] [--no-stacks] [--no-gpu] [--safe-mode]
                            [--max-mb N] [--min-free-mb N] [--history-hours N]
                            [--iostat-json] [--irq-interval S]
                            [--app-metrics URL]... [--app-log FILE --app-pattern ERE]... [-h]
       hindsight-capture.sh --ring MINUTES [--trigger SPEC]... [--cooldown S]
                            [--max-dumps N] [same options as above, but -d]
       hindsight-capture.sh --dump [-o OUT_DIR]

Capture a Hindsight bundle: time series (vmstat, iostat, mpstat, sar, pidstat, PSI,
cgroups, meminfo, /proc/vmstat, dmesg, nvidia-smi dmon, InfiniBand, bpftrace) and
start/end snapshots of the host configuration, into OUT_DIR/hindsight-<host>-<UTC>/
and OUT_DIR/hindsight-<host>-<UTC>.tgz. Then: analyze hindsight-<host>-<UTC>.tgz

  -d, --duration S   capture length in seconds (default 60; 0 = until Ctrl-C, max 24 h)
  -i, --interval S   sampling interval in whole seconds (default 1)
  -o, --out DIR      where the bundle goes (default: current directory)
  --pid PID          a workload process to follow (repeatable); default: top consumers
  --cgroup PATH      a cgroup to follow, e.g. /sys/fs/cgroup/train.slice or
                     train.slice (repeatable); --pid adds the cgroups of each PID
  --no-bpf           do not run bpftrace
  --no-stacks        no sampled on-CPU stacks (bpftrace profile, ~3-7 % of one core;
                     without bpftrace perf record, ~16 % of one core on 2 CPUs)
  --no-gpu           do not run nvidia-smi
  --safe-mode        skip what can hang on a sick host (nvidia-smi, bpftrace, perf)
  --max-mb N         stop collecting when the bundle directory reaches N MiB (default 500)
  --min-free-mb N    stop when the output filesystem has less than N MiB free (default 100)
  --history-hours N  also convert sysstat's own daily files (sa*) of the last N hours
                     with sadf -j (default 6; 0 = no)
  --iostat-json      also run 'iostat -o JSON' (same numbers as the iostat text, ~2x the
                     bytes; off by default)
  --irq-interval S   per-CPU interrupt/softirq tables (mpstat -I) every S seconds (default:
                     the smallest multiple of the interval >= 10 s; at most the duration)
  --app-metrics URL  scrape this Prometheus endpoint (http/https) every interval with curl
                     or wget, whole page kept (repeatable; docs/capture.md "Application")
  --app-log FILE     follow this log from its end (tail -F) and keep the lines matching
  --app-pattern ERE  the ERE given with it, each with its arrival time (pairs, repeatable)
  -h, --help         this help

Flight recorder (docs/capture.md): --ring MINUTES keeps the last MINUTES of every
collector in rotating slots (disk bounded by --max-mb) and cuts a bundle into OUT_DIR
on SIGUSR1, on 'hindsight-capture.sh --dump -o OUT_DIR' or when a trigger fires:
  --trigger SPEC     psi:memory:some:avg10>20, dmesg:Out of memory, gpu:util<10:for=30
                     (repeatable; psi RESOURCE:some|full:avg10|avg60|avg300, gpu METRIC
                     = an nvidia-smi dmon column or util; ':for=S' = held S seconds)
  --cooldown S       ignore triggers for S seconds after a triggered bundle (default: ring)
  --max-dumps N      at most N triggered bundles per recorder run (default 20)
  --dump             ask the recorder running under -o OUT_DIR for a bundle; print its path
SIGTERM/SIGINT stop a recorder (exit 0) without a bundle.

Ctrl-C (or SIGTERM) at any moment stops the collectors and still writes the bundle.
Run as root for dmesg, bpftrace, other users' environments and pstore.
Environment: HINDSIGHT_CMD_TIMEOUT=S limits every one-shot command to S seconds;
HINDSIGHT_APP_MAX_KB=N caps one --app-metrics page at N KiB (default 1024).
Example: sudo sh hindsight-capture.sh -d 120 --pid 4242 -o /var/tmp
EOF
}

# ---------------------------------------------------------------- helpers
say() {
    printf 'hindsight: %s\n' "$*" >&2
    if [ -n "${LOG:-}" ]; then
        read -r _say_up _ </proc/uptime 2>/dev/null || _say_up=0
        printf '[+%ss] %s\n' "$(( ${_say_up%.*} - ${START_UP:-${_say_up%.*}} ))" "$*" >>"$LOG" 2>/dev/null
    fi
    return 0
}
err() { say "error: $*"; }
die() {
    err "$*"
    exit 1
}
have_cmd() { command -v "$1" >/dev/null 2>&1; }
need_cmd() { have_cmd "$1" || die "need '$1' (command not found)"; }
ensure() { "$@" || die "command failed: $*"; }
ignore() { "$@" 2>/dev/null || true; }
is_uint() {
    case $1 in '' | *[!0-9]*) return 1 ;; esac
    return 0
}
# replace tabs and newlines by spaces (registry and meta files are TSV)
clean() {
    _cl=$1
    while :; do
        case $_cl in
        *"$TAB"*) _cl="${_cl%%"$TAB"*} ${_cl#*"$TAB"}" ;;
        *"$NL"*) _cl="${_cl%%"$NL"*} ${_cl#*"$NL"}" ;;
        *) break ;;
        esac
    done
    CLEAN=$_cl
}
# shell-quote a command line for the manifest (display only)
cmdline() {
    CMDLINE=
    for _a in "$@"; do
        case $_a in
        '' | *[!A-Za-z0-9_./:=,+%@-]*) _a="'$(printf '%s' "$_a" | sed "s/'/'\\\\''/g")'" ;;
        esac
        CMDLINE="${CMDLINE:+$CMDLINE }$_a"
    done
}
uptime_now() {
    read -r _u _ </proc/uptime
    UP=${_u%.*}
}
# sleep that a trapped signal interrupts at once
nap() {
    sleep "$1" &
    NAP_PID=$!
    wait "$NAP_PID"
    NAP_PID=
}

# ---------------------------------------------------------------- state files
# .state/reg:  name kind tool output stderr statusfile state rc reason flags command (TSV)
# .state/meta: key type value (TSV; later lines win)
# A write that fails (full disk) stops the collectors, which gives the reserve back, and
# is written again on a line of its own (the manifest skips a line cut short).
meta() {
    clean "$3"
    printf '%s\t%s\t%s\n' "$1" "$2" "$CLEAN" >>.state/meta 2>/dev/null || {
        disk_full_check
        printf '\n%s\t%s\t%s\n' "$1" "$2" "$CLEAN" >>.state/meta 2>/dev/null
    }
}
meta_list() {
    _k=$1
    shift
    meta "$_k" l0 ""
    for _v in "$@"; do meta "$_k" ls "$_v"; done
}
reg() {
    clean "$9"
    _reason=$CLEAN
    clean "${11}"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$_reason" "${10}" "$CLEAN" >>.state/reg 2>/dev/null || {
        disk_full_check
        printf '\n%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$_reason" "${10}" "$CLEAN" >>.state/reg 2>/dev/null
    }
}
# reg_off NAME KIND TOOL STATUS REASON COMMAND: a collector that did not run
reg_off() {
    reg "$1" "$2" "$3" "" "" "" "$4" "" "$5" "" "$6"
    say "$4: $1 ($5)"
}

# ---------------------------------------------------------------- awk programs
# JSON manifest + summary. Inputs: .state/meta .state/reg .state/sizes
MANIFEST_AWK='
function jstr(s,    out, i, n, c, o, need, j, ok, o2) {
    if (s !~ /[^ -~]/ && s !~ /["\\]/) return "\"" s "\""
    out = ""; n = length(s)
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1); o = ORD[c]
        if (c == "\"") out = out "\\\""
        else if (c == "\\") out = out "\\\\"
        else if (o < 32 || o == 127) out = out sprintf("\\u%04x", o)
        else if (o < 128) out = out c
        else {
            need = (o >= 194 && o <= 223) ? 1 : (o >= 224 && o <= 239) ? 2 : (o >= 240 && o <= 244) ? 3 : 0
            ok = (need > 0 && i + need <= n)
            for (j = 1; ok && j <= need; j++) {
                o2 = ORD[substr(s, i + j, 1)]
                if (o2 < 128 || o2 > 191) ok = 0
                if (j == 1 && ((o == 224 && o2 < 160) || (o == 237 && o2 > 159) || (o == 240 && o2 < 144) || (o == 244 && o2 > 143))) ok = 0
            }
            if (ok) { out = out substr(s, i, need + 1); i += need } else out = out "\\ufffd"
        }
    }
    return "\"" out "\""
}
function jnum(v) { return (v ~ /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/) ? v : "null" }
function V(k) { return (k in M) ? M[k] : "null" }
function errtail(f,    l, last, r) {
    last = ""
    while ((r = (getline l < f)) > 0) if (l ~ /[^ \t]/) last = l
    close(f)
    gsub(/^[ \t]+|[ \t]+$/, "", last)
    return substr(last, 1, 300)
}
BEGIN {
    FS = "\t"
    for (i = 1; i < 256; i++) ORD[sprintf("%c", i)] = i
}
FILENAME ~ /meta$/ {
    k = $1; t = $2; v = $3
    if (t == "s") M[k] = jstr(v)
    else if (t == "n") M[k] = jnum(v)
    else if (t == "b") M[k] = (v == "true" || v == "false") ? v : "null"
    else if (t == "z") M[k] = "null"
    else if (t == "l0") { M[k] = "[]"; L[k] = "" }
    else if (t == "ls") { L[k] = L[k] (L[k] == "" ? "" : ", ") jstr(v); M[k] = "[" L[k] "]" }
    else if (t == "ln") { if (jnum(v) != "null") { L[k] = L[k] (L[k] == "" ? "" : ", ") v }; M[k] = "[" L[k] "]" }
    next
}
FILENAME ~ /reg$/ {
    if (NF != 11) next
    if (!($1 in SEEN)) { SEEN[$1] = 1; ORDER[++NC] = $1 }
    R[$1] = $0
    next
}
FILENAME ~ /sizes$/ {
    if ($0 ~ /:$/) { dir = substr($0, 1, length($0) - 1); next }
    n = split($0, f, " ")
    if (f[1] ~ /^-/ && n >= 9) SIZE[dir "/" f[n]] = f[5]
    next
}
END {
    printf "{\n"
    printf "  \"format\": \"hindsight-bundle\",\n"
    printf "  \"format_version\": %s,\n", V("format_version")
    printf "  \"capture_version\": %s,\n", V("capture_version")
    printf "  \"host\": {\"hostname\": %s, \"kernel\": %s, \"os\": %s, \"arch\": %s, \"cpus\": %s},\n", V("hostname"), V("kernel"), V("os"), V("arch"), V("cpus")
    printf "  \"start_utc\": %s,\n  \"end_utc\": %s,\n  \"updated_utc\": %s,\n", V("start_utc"), V("end_utc"), V("updated_utc")
    printf "  \"interval_s\": %s,\n  \"duration_s\": %s,\n", V("interval_s"), V("duration_s")
    printf "  \"timezone\": %s,\n  \"utc_offset\": %s,\n", V("timezone"), V("utc_offset")
    printf "  \"clock\": {\"start_epoch_s\": %s, \"start_uptime_s\": %s, \"boot_epoch_s\": %s, \"end_epoch_s\": %s, \"end_uptime_s\": %s, \"clocksource\": %s,\n", V("start_epoch_s"), V("start_uptime_s"), V("boot_epoch_s"), V("end_epoch_s"), V("end_uptime_s"), V("clocksource")
    printf "            \"ntp\": {\"source\": %s, \"synchronized\": %s, \"offset_s\": %s}},\n", V("ntp_source"), V("ntp_synchronized"), V("ntp_offset_s")
    printf "  \"user\": {\"uid\": %s, \"root\": %s},\n", V("uid"), V("root")
    printf "  \"interrupted\": %s,\n  \"complete\": %s,\n  \"stop_reason\": %s,\n", (interrupted ? "true" : "false"), (complete ? "true" : "false"), V("stop_reason")
    printf "  \"options\": {\"safe_mode\": %s, \"no_bpf\": %s, \"no_gpu\": %s, \"max_mb\": %s, \"min_free_mb\": %s, \"iostat_json\": %s, \"irq_interval_s\": %s},\n", V("safe_mode"), V("no_bpf"), V("no_gpu"), V("max_mb"), V("min_free_mb"), V("iostat_json"), V("irq_interval_s")
    printf "  \"targets\": {\"pids\": %s, \"pids_auto\": %s, \"cgroups\": %s},\n", (("pids" in M) ? M["pids"] : "[]"), V("pids_auto"), (("cgroups" in M) ? M["cgroups"] : "[]")
    if ("ring_minutes" in M) printf "  \"ring\": {\"minutes\": %s, \"segment_s\": %s, \"segments_kept\": %s, \"slot_unit_bytes\": %s, \"cooldown_s\": %s, \"max_dumps\": %s, \"triggers\": %s, \"recorder_start_utc\": %s, \"dumps\": %s, \"suppressed\": %s},\n", V("ring_minutes"), V("ring_segment_s"), V("ring_segments_kept"), V("ring_slot_unit_bytes"), V("ring_cooldown_s"), V("ring_max_dumps"), (("ring_triggers" in M) ? M["ring_triggers"] : "[]"), V("recorder_start_utc"), V("ring_dumps"), V("ring_suppressed")
    else printf "  \"ring\": null,\n"
    if ("trigger_name" in M) printf "  \"trigger\": {\"source\": %s, \"name\": %s, \"utc\": %s, \"epoch_s\": %s, \"value\": %s},\n", V("trigger_source"), V("trigger_name"), V("trigger_utc"), V("trigger_epoch_s"), V("trigger_value")
    else printf "  \"trigger\": null,\n"
    printf "  \"history\": {\"hours\": %s, \"until_utc\": %s, \"files\": %s},\n", V("history_hours"), V("history_until"), (("history_files" in M) ? M["history_files"] : "[]")
    printf "  \"args\": %s,\n", (("args" in M) ? M["args"] : "[]")
    printf "  \"collectors\": ["
    nsum = 0
    for (i = 1; i <= NC; i++) {
        split(R[ORDER[i]], c, "\t")
        name = c[1]; kind = c[2]; tool = c[3]; out = c[4]; errf = c[5]; stf = c[6]
        st = c[7]; rc = c[8]; reason = c[9]; flags = c[10]; cmd = c[11]
        if (kind == "series" && st == "running") {
            have = 0
            if (stf != "" && (getline l < stf) > 0) { have = 1; rc = substr(l, 4) }
            if (stf != "") close(stf)
            # .state/<name>.early: it had already ended when the capture began to stop it
            early = 0
            if (stf != "" && (getline l < (".state/" name ".early")) >= 0) { early = 1; close(".state/" name ".early") }
            sig = (rc ~ /^[0-9]+$/ && rc + 0 > 128 && rc + 0 < 160) ? rc - 128 : 0
            if (!have) {
                if (dump) { st = "ok"; reason = "flight recorder: still recording when this bundle was cut" }
                else if (complete) { st = "failed"; rc = ""; reason = "did not exit when stopped" }
            } else if (rc == "0") st = "ok"
            else if (rc == "124") { st = "timeout"; reason = "ran past its time limit" }
            else if (stopped && (!early || rc == sigrc) && (rc == "143" || rc == "137" || rc == "130" || rc == "129")) { st = "ok"; reason = "stopped by the capture" }
            else if (sig) { st = "failed"; reason = "killed by signal " sig " before the capture stopped" }
            else { st = "failed" }
        }
        dropf = ".state/" name ".dropped"; nd = 0
        while ((getline dl < dropf) > 0) { split(dl, dd, " "); if (dd[1] + 0 >= first_slot + 0) nd += dd[2] }
        close(dropf)
        if (nd > 0) reason = (reason == "" ? "" : reason "; ") nd " lines dropped (flight recorder: per-slot size cap)"
        # .state/<name>.note: "status<TAB>reason" of an application collector (scrapes failed...)
        notef = ".state/" name ".note"
        if ((getline nl < notef) > 0) {
            k = index(nl, "\t"); nst = substr(nl, 1, k - 1); nmsg = substr(nl, k + 1)
            if (st == "ok" && nst == "failed") { st = "failed"; reason = nmsg }
            else if (nmsg != "" && (st == "ok" || st == "failed")) reason = (reason == "" ? "" : reason "; ") nmsg
        }
        close(notef)
        if ((st == "failed" || st == "timeout") && reason == "" && errf != "") reason = errtail(errf)
        if (st == "failed" && reason == "") reason = "exit code " rc
        bytes = 0
        if (out ~ /\/$/) { for (p in SIZE) if (index(p, out) == 1) bytes += SIZE[p] }
        else if (out in SIZE) bytes = SIZE[out]
        if (st == "ok" && bytes == 0 && out != "" && flags !~ /empty_ok/ && reason == "") reason = "no output"
        printf "%s\n    {\"name\": %s, \"kind\": %s, \"tool\": %s, \"command\": %s, \"output\": %s, \"stderr\": %s, \"status\": %s, \"exit_code\": %s, \"reason\": %s, \"bytes\": %s}", (i > 1 ? "," : ""), jstr(name), jstr(kind), jstr(tool), (cmd == "" ? "null" : jstr(cmd)), (out == "" ? "null" : jstr(out)), (errf == "" ? "null" : jstr(errf)), jstr(st), jnum(rc), (reason == "" ? "null" : jstr(reason)), bytes
        if (summary != "" && st != "ok" && st != "running") {
            nsum++
            printf "  %-8s %-18s %s\n", st, name, reason > summary
        }
        if (summary != "" && st == "ok") nok++
    }
    printf "\n  ]\n}\n"
    if (summary != "") printf "  %d collectors ok, %d not ok (listed above)\n", nok, nsum > summary
}
'

# awk functions both awk programs below use: a path with blanks or backslashes
# escaped as octal (\040 ...), and the epoch second
AWK_LIB='
function esc(p,    r, i, c) {
    if (p !~ /[ \t\n\\]/) return p
    r = ""
    for (i = 1; i <= length(p); i++) {
        c = substr(p, i, 1)
        if (c == " ") r = r "\\040"; else if (c == "\t") r = r "\\011"
        else if (c == "\n") r = r "\\012"; else if (c == "\\") r = r "\\134"; else r = r c
    }
    return r
}
function now_s(   t) { srand(); t = srand(); return t }
'
# samplers: one awk reads the ticker (one epoch per line) on stdin; each tick it copies
# every file of each list, line by line, as "<epoch> <path> <line>" (filtered by mode)
# into series/<mode>.out. One process for all samplers keeps the cost per tick at two
# forks (date, sleep).
SAMPLER_AWK="$AWK_LIB"'
function fire(tn, value) {
    print now_s() "\t" tn "\t" value >> fired
    close(fired)
    system("kill -USR1 " main " 2>/dev/null")
}
# psi triggers on /proc/pressure/<res> lines: "some avg10=1.20 avg60=... total=..."
function psi_check(path, line, ts,    j, res, f, n, kv, k, v, key) {
    res = path; sub(/^\/proc\/pressure\//, "", res)
    n = split(line, f, " ")
    for (j = 1; j <= npt; j++) {
        if (PR[j] != res || PK[j] != f[1]) continue
        v = ""
        for (k = 2; k <= n; k++) { split(f[k], kv, "="); if (kv[1] == PF[j]) v = kv[2] }
        if (v == "") continue
        if ((PO[j] == ">" && v + 0 > PV[j] + 0) || (PO[j] == "<" && v + 0 < PV[j] + 0) || (PO[j] == ">=" && v + 0 >= PV[j] + 0) || (PO[j] == "<=" && v + 0 <= PV[j] + 0)) {
            if (!(j in SINCE)) SINCE[j] = ts
            if (!(j in DONE) && ts - SINCE[j] >= PT[j]) { DONE[j] = 1; fire(PN[j], res " " f[1] " " PF[j] "=" v) }
        } else { delete SINCE[j]; delete DONE[j] }
    }
}
# flight recorder: a new time slot for the output of every sampler; old slots deleted
function slot_roll(s,    i, k, m, rm) {
    for (i = 1; i <= n; i++) close(OUT[i])
    cur = s
    for (i = 1; i <= n; i++) OUT[i] = "series/" MODE[i] "." s
    made[s] = 1
    for (k in made) if (k + 0 < s - nkeep) {
        rm = "rm -f"; for (m in MODES) { rm = rm " series/" m "." k; if ((m, k) in DROP) { delete DROP[m, k]; DIRTYD[m] = 1; anyd = 1 } }
        system(rm); delete made[k]
    }
    save_drops()
    for (m in MODES) CAP[m] = cap(m)
    delete BYTES
    delete RECHECKED
}
# lines dropped per mode and kept slot: .state/<mode>.dropped, "slot count" lines
function save_drops(   m, k, f, sp) {
    for (m in MODES) {
        if (!(m in DIRTYD)) continue
        f = ".state/" m ".dropped"; printf "" > f
        for (k in DROP) { split(k, sp, SUBSEP); if (sp[1] == m) print sp[2], DROP[k] > f }
        close(f); delete DIRTYD[m]
    }
    anyd = 0; lastsave = now_s()
}
function cap(m,    v, c, f) { c = 0; f = ".state/cap." m; if ((getline v < f) > 0 && v + 0 > 0) c = v + 0; close(f); return c }
function keep(mode, p, line,    k) {
    if (mode == "proc_vmstat") {
        k = line; sub(/ .*/, "", k)
        return (k in VMKEY) || k ~ /^(pgscan|pgsteal|allocstall|compact_|thp_fault|workingset_refault|pswp|pgpg|oom_kill|kswapd)/
    }
    if (mode == "cgroup" && p ~ /memory\.stat$/) {
        k = line; sub(/ .*/, "", k)
        return (k in MEMKEY)
    }
    return 1
}
BEGIN {
    # lists: "mode=listfile mode=listfile ..."; output series/<mode>.out
    n = 0
    k = split(lists, ml, " ")
    for (j = 1; j <= k; j++) {
        m = ml[j]; sub(/=.*/, "", m); lf = ml[j]; sub(/^[^=]*=/, "", lf)
        while ((getline l < lf) > 0) if (l != "") { F[++n] = l; LAB[n] = esc(l); MODE[n] = m; OUT[n] = "series/" m ".out" }
        close(lf)
        MODES[m] = 1
        if (!ring) printf "" > ("series/" m ".out")
    }
    npt = 0
    if (ring) while ((getline l < trigs) > 0) {
        split(l, a, "\t")
        if (a[1] != "psi") continue
        npt++; PN[npt] = a[2]; split(a[3], w, ":"); PR[npt] = w[1]; PK[npt] = w[2]; PF[npt] = w[3]; PO[npt] = a[4]; PV[npt] = a[5]; PT[npt] = a[6] + 0
    }
    if (ring) close(trigs)
    split("nr_dirty nr_writeback nr_writeback_temp nr_dirty_threshold nr_dirty_background_threshold nr_free_pages nr_file_pages nr_anon_pages nr_mapped nr_shmem nr_slab_reclaimable nr_slab_unreclaimable nr_dirtied nr_written pgfault pgmajfault drop_pagecache drop_slab", a, " ")
    for (i in a) VMKEY[a[i]] = 1
    split("anon file kernel kernel_stack pagetables sock shmem file_mapped file_dirty file_writeback anon_thp inactive_anon active_anon inactive_file active_file unevictable slab_reclaimable slab_unreclaimable pgfault pgmajfault workingset_refault_anon workingset_refault_file pgscan pgsteal pgscan_direct pgsteal_direct pgscan_kswapd pgsteal_kswapd swapcached zswap cache rss rss_huge mapped_file dirty writeback swap total_cache total_rss total_rss_huge total_shmem total_mapped_file total_dirty total_writeback total_swap total_pgfault total_pgmajfault total_inactive_file total_active_file hierarchical_memory_limit hierarchical_memsw_limit", a, " ")
    for (i in a) MEMKEY[a[i]] = 1
}
{
    ts = $1
    if (ring && int(ts / slot_s) != cur) slot_roll(int(ts / slot_s))
    for (i = 1; i <= n; i++) {
        p = F[i]
        o = OUT[i]
        while ((r = (getline line < p)) > 0) {
            if (npt && MODE[i] == "psi" && p ~ /^\/proc\/pressure\//) psi_check(p, line, ts)
            if (!keep(MODE[i], p, line)) continue
            if (ring && CAP[MODE[i]] > 0) {
                b = length(ts) + length(LAB[i]) + length(line) + 3
                if (BYTES[o] + b > CAP[MODE[i]] && !(MODE[i] in RECHECKED)) { CAP[MODE[i]] = cap(MODE[i]); RECHECKED[MODE[i]] = 1 }
                if (BYTES[o] + b > CAP[MODE[i]]) { DROP[MODE[i], cur]++; DIRTYD[MODE[i]] = 1; anyd = 1; continue }
                BYTES[o] += b
            }
            print ts, LAB[i], line > o
        }
        close(p)
        if (r < 0 && !(i in WARNED)) { WARNED[i] = 1; print "hindsight sampler: cannot read " p > ("series/" MODE[i] ".err") }
        DIRTY[o] = 1
    }
    for (o in DIRTY) fflush(o)
    if (ring && anyd && ts - lastsave >= 1) save_drops()
}
'

# ticker for the samplers: prints an epoch per interval while the capture lives
TICKER_SH='iv=$1 fmt=$2 main=$3 stop=$4 max=$5
shift 5
n=0
while [ "$n" -lt "$max" ] && [ ! -e "$stop" ] && kill -0 "$main" 2>/dev/null; do
    date "$fmt" || break
    n=$((n + 1))
    sleep "$iv" || break
done | "$@"'

# proc_cgroup: every IV s, the cgroup of every process (pidstat names processes, not
# their cgroups): one awk over /proc/<pid>/cgroup, lines of the unified hierarchy (0::)
# and of the cpu, memory and name=systemd controllers, printed as "<epoch> <pid>
# <line>|<line>..." (escaped as esc()) only when a PID is new or its cgroups changed
# since the last pass (SEEN keeps "<pid> <value>"; empty SEEN: every pass prints all,
# for the flight recorder whose old slots are deleted). A process gone between the
# glob and the read is skipped (getline < file fails, awk goes on).
PROC_CGROUP_AWK="$AWK_LIB"'
BEGIN { if (seen != "") { while ((getline l < seen) > 0) { i = index(l, " "); S[substr(l, 1, i - 1)] = substr(l, i + 1) } close(seen) } }
{
    pid = $0; sub(/^\/proc\//, "", pid); sub(/\/cgroup$/, "", pid)
    v = ""
    while ((getline l < $0) > 0) if (l ~ /^0::/ || l ~ /^[0-9]+:([^:]*,)?(cpu|memory|name=systemd)(,[^:]*)?:/) v = v (v == "" ? "" : "|") l
    close($0)
    if (v == "") next
    v = esc(v); N[pid] = v
    if (!(pid in S) || S[pid] != v) print t, pid, v
}
END { if (seen != "") { printf "" > seen; for (k in N) print k, N[k] > seen; close(seen) } }
'
PROC_CGROUP_SH='iv=$1 fmt=$2 main=$3 stop=$4 max=$5 seen=$6 prog=$7
n=0
[ -z "$seen" ] || : >"$seen"
while [ "$n" -lt "$max" ] && [ ! -e "$stop" ] && kill -0 "$main" 2>/dev/null; do
    n=$((n + 1))
    t=$(date "$fmt") || break
    printf "%s\n" /proc/[0-9]*/cgroup | awk -v t="${t%%.*}" -v seen="$seen" "$prog"
    sleep "$iv" || break
done'

# perf_stacks (the sampled stacks without bpftrace): folds the output of 'perf script -F
# comm,pid,ip,sym,dso' (a "comm pid" line, then one frame a line, leaf first, kernel frames
# first) into "comm-pid;root;...;leaf COUNT" lines (flamegraph.pl's folded form) the way
# analyzer/parsers/stacks.py folds bpftrace's keys: symbols without offsets, "[module]" or
# "[unknown]" when unknown, ";" -> ":", kernel frames marked "_[k]", at most KMAX kernel
# and UMAX user frames (the innermost); idle (pid 0) is not counted. Each line is
# prefixed with its count and a tab for sort (the @samples line first); cut drops it.
PERF_FOLD_AWK='
function flush(    s, i) {
    if (pid != "" && pid + 0 != 0) {
        s = comm "-" pid
        for (i = nu; i >= 1; i--) s = s ";" U[i]
        for (i = nk; i >= 1; i--) s = s ";" K[i]
        C[s]++
        n++
    }
    pid = ""; nu = 0; nk = 0
}
/^[^ \t]/ {
    flush()
    h = $0; sub(/[ \t]+$/, "", h)
    p = h; sub(/.*[ \t]/, "", p)
    if (p !~ /^[0-9]+$/) next
    pid = p; comm = h; sub(/[ \t]*[0-9]+$/, "", comm); gsub(/;/, ":", comm)
    next
}
pid != "" && /^[ \t]+[0-9a-f]+ / {
    l = $0; sub(/^[ \t]+/, "", l)
    ip = l; sub(/ .*/, "", ip); l = substr(l, length(ip) + 2)
    dso = ""
    if (l ~ /\)$/) {
        j = 0
        for (i = length(l) - 1; i > 1; i--) if (substr(l, i, 2) == " (") { j = i; break }
        if (j) { dso = substr(l, j + 2, length(l) - j - 2); l = substr(l, 1, j - 1) }
    }
    kern = (dso ~ /kernel\.kallsyms/ || (length(ip) == 16 && ip ~ /^ffff/))
    sub(/\+0x[0-9a-f]+$/, "", l)
    if (l == "" || l == "[unknown]" || l ~ /^0x[0-9a-f]+$/) {
        b = dso; sub(/.*\//, "", b)
        if (kern || b == "" || b == "[unknown]") l = "[unknown]"
        else if (b ~ /^\[.*\]$/) l = b
        else l = "[" b "]"
    }
    gsub(/;/, ":", l)
    if (kern) { if (nk < kmax) K[++nk] = l "_[k]" }
    else if (nu < umax) U[++nu] = l
    next
}
{ flush() }
END {
    flush()
    printf "%s\t@samples: %d\n", "999999999999", n
    for (s in C) printf "%d\t%s %d\n", C[s], s, C[s]
}
'
# one 'perf record' of all CPUs (cpu-clock at 49 Hz, call graphs by frame pointer, no
# build-id cache under ~/.debug) that closes its file every SLICE s (DATA.<UTC time of
# the switch>, at most 2 kept); each closed file is printed as a time line (from its
# name), '@samples: N' and the TOP most frequent folded stacks, then removed. The first
# time line (before perf starts) starts the first slice. At SIGTERM the slice being
# recorded is lost (like bpftrace's last one); one being folded is finished first (the
# fold ignores SIGTERM; timeout -k kills it 3 s later); DATA and its files are removed.
PERF_STACKS_SH='main=$1 stop=$2 data=$3 slice=$4 top=$5 prog=$6
tab=$(printf "\t")
rec=
trap '\''[ -z "$rec" ] || { kill -TERM "$rec"; wait "$rec"; } 2>/dev/null; rm -f "$data" "$data".[0-9]*; exit 0'\'' TERM INT HUP
printf "hindsight stacks (perf): on-CPU stacks at 49 Hz per CPU, top %s every %s s\n" "$top" "$slice"
date -u +%Y-%m-%dT%H:%M:%SZ
TZ=UTC0 perf record -e cpu-clock -F 49 -g -a -q -N -B --switch-output="${slice}s" --switch-max-files=2 \
    -o "$data" </dev/null &
rec=$!
while kill -0 "$rec" 2>/dev/null && [ ! -e "$stop" ] && kill -0 "$main" 2>/dev/null; do
    sleep 1
    for f in "$data".[0-9]*; do
        [ -f "$f" ] || continue
        echo "${f##*.}" | sed "s/^\(....\)\(..\)\(..\)\(..\)\(..\)\(..\).*/\1-\2-\3T\4:\5:\6Z/"
        (
            trap "" TERM INT HUP
            perf script -i "$f" -F comm,pid,ip,sym,dso | awk -v kmax=16 -v umax=24 "$prog" |
                sort -t "$tab" -k1,1nr -k2,2 | head -n "$((top + 1))" | cut -f 2-
        )
        rm -f "$f"
    done
done
if kill -0 "$rec" 2>/dev/null; then
    { kill -TERM "$rec"; wait "$rec"; } 2>/dev/null
    rc=0
else
    wait "$rec"
    rc=$?
    [ "$rc" = 0 ] || echo "hindsight perf_stacks: perf record ended early, exit code $rc" >&2
fi
rm -f "$data" "$data".[0-9]*
exit "$rc"'

# --app-metrics: one scraper per endpoint. Every interval one page (curl or wget, at
# most LIM s, at most CAP bytes) between two marker lines on stdout (block writer
# below); NOTE holds "status<TAB>reason" for the manifest. "$@": the timeout(1) prefix.
SCRAPE_SH='url=$1 shown=$2 iv=$3 fmt=$4 main=$5 stop=$6 max=$7 tool=$8 lim=$9
shift 9
conn=$1 cap=$2 budget=$3 tmp=$4 note=$5 wgnu=$6 blk=$7
shift 7
acc="application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
n=0 good=0 bad=0 cut=0 total=0 last=
while [ "$n" -lt "$max" ] && [ ! -e "$stop" ] && kill -0 "$main" 2>/dev/null; do
    n=$((n + 1))
    sleep "$iv" &
    nap=$!
    t0=$(date "$fmt")
    if [ "$tool" = curl ]; then
        { "$@" curl -fsS --proto =http,https -H "Accept: $acc" --connect-timeout "$conn" --max-time "$lim" "$url"; echo "$?" >"$tmp.rc"; } 2>"$tmp.err" | head -c "$((cap + 1))" >"$tmp.body"
    elif [ -n "$wgnu" ]; then
        { "$@" wget -nv --tries=1 --timeout="$lim" --header "Accept: $acc" -O - "$url"; echo "$?" >"$tmp.rc"; } 2>"$tmp.err" | head -c "$((cap + 1))" >"$tmp.body"
    else
        { "$@" wget -q --header "Accept: $acc" -O - "$url"; echo "$?" >"$tmp.rc"; } 2>"$tmp.err" | head -c "$((cap + 1))" >"$tmp.body"
    fi
    t1=$(date "$fmt")
    rc=1
    read -r rc <"$tmp.rc" 2>/dev/null
    size=$(wc -c <"$tmp.body")
    size=${size##* }
    trunc=0
    if [ "$size" -gt "$cap" ]; then
        # a page over the cap: its first CAP bytes, less the line cut in two
        trunc=1 rc=0 cut=$((cut + 1))
        head -c "$cap" "$tmp.body" | sed "\$d" >"$tmp.keep"
        mv -f "$tmp.keep" "$tmp.body"
        size=$(wc -c <"$tmp.body")
        size=${size##* }
    fi
    why=
    if [ "$rc" = 0 ]; then
        good=$((good + 1))
    else
        bad=$((bad + 1))
        case $rc in
        124 | 137 | 143) why="no answer within $lim s (stopped by timeout)" ;;
        *) why=$(tail -n 1 "$tmp.err" | tr "\t\r" "  " | cut -c 1-200) ;;
        esac
        [ -n "$why" ] || why="$tool exit code $rc"
        last=$why size=0
        : >"$tmp.body"
    fi
    total=$((total + size))
    HS_T0=$t0 HS_T1=$t1 HS_URL=$shown HS_END="rc=$rc bytes=$size truncated=$trunc" HS_WHY=$why awk "$blk" "$tmp.body"
    st=ok msg=
    if [ "$good" = 0 ]; then
        st=failed msg="every scrape failed ($bad): $last"
    elif [ "$bad" -gt 0 ]; then
        msg="$bad of $n scrapes failed (last: $last)"
    fi
    [ "$cut" = 0 ] || msg="${msg:+$msg; }$cut of $n pages cut at $((cap / 1024)) KiB (HINDSIGHT_APP_MAX_KB)"
    if [ "$budget" -gt 0 ] && [ "$total" -ge "$budget" ]; then
        msg="${msg:+$msg; }stopped after $n scrapes: its share of --max-mb ($((budget / 1048576)) MiB) is used"
        printf "%s\t%s\n" "$st" "$msg" >"$note"
        break
    fi
    printf "%s\t%s\n" "$st" "$msg" >"$note"
    wait "$nap"
done
rm -f "$tmp.rc" "$tmp.err" "$tmp.body"'
# one scrape as a block: begin marker, the page as it came (a line that would read as a
# marker gets one more "#"), end marker. Strings come through ENVIRON (no escapes).
SCRAPE_AWK='
BEGIN { printf "# hindsight-scrape begin %s %s\n", ENVIRON["HS_T0"], ENVIRON["HS_URL"] }
/^# hindsight-scrape / { $0 = "#" $0 }
{ print }
END {
    why = ENVIRON["HS_WHY"]
    printf "# hindsight-scrape end %s %s dur_ms=%.1f%s\n", ENVIRON["HS_T1"], ENVIRON["HS_END"], (ENVIRON["HS_T1"] - ENVIRON["HS_T0"]) * 1000, (why == "" ? "" : " error=" why)
    fflush()
}
'

# --app-log: tail -F of FILE into a fifo, read by APPLOG_AWK; "$@": the tail command
APPLOG_SH='file=$1 fifo=$2 prog=$3 pat=$4 maxps=$5 budget=$6 inter=$7 fmt=$8 note=$9
shift 9
rm -f "$fifo"
mkfifo "$fifo" || exit 1
i=
[ -n "$inter" ] && i="-W interactive" # mawk reads pipes in blocks without it
HS_FILE=$file HS_PAT=$pat awk $i -v maxps="$maxps" -v budget="$budget" -v fmt="$fmt" -v note="$note" "$prog" <"$fifo" &
a=$!
"$@" "$file" >"$fifo" &
t=$!
trap '\''kill "$t" "$a" 2>/dev/null'\'' TERM INT HUP
wait "$a"
rc=$?
kill "$t" 2>/dev/null
rm -f "$fifo"
exit "$rc"'
# the matching lines, each as "<epoch_s> <path> <line>" (docs/bundle-format.md)
APPLOG_AWK="$AWK_LIB"'
function remark(s) { print "# hindsight-app-log " s; fflush() }
function tally(   m) {
    if (!drop) return
    remark("dropped " drop " matching lines (more than " maxps " in second " sec ")")
    dropped += drop; drop = 0
    m = dropped " matching lines dropped (more than " maxps " a second)"
    if (full) m = m "; its share of --max-mb is used: later lines not kept"
    printf "ok\t%s\n", m > note
    close(note)
}
BEGIN {
    pat = ENVIRON["HS_PAT"]; path = esc(ENVIRON["HS_FILE"]); cmd = "date " fmt
    remark("begin pattern=" pat)
}
$0 ~ pat {
    s = now_s()
    if (s != sec) { tally(); sec = s; n = 0 }
    if (++n > maxps) { drop++; next }
    if (budget > 0 && bytes >= budget) {
        if (!full) {
            full = 1; remark("full: its share of --max-mb is used; later lines are not kept")
            printf "ok\tits share of --max-mb is used: later lines not kept\n" > note
            close(note)
        }
        next
    }
    t = ""
    cmd | getline t
    close(cmd)
    line = substr($0, 1, 4096)
    print t, path, line
    fflush()
    bytes += length(t) + length(path) + length(line) + 3
}
END { tally() }
'

# file dump: "<path> <line>" for each line of each file in the list
DUMP_AWK='
BEGIN {
    while ((getline f < list) > 0) {
        if (f == "") continue
        n = 0
        while ((r = (getline l < f)) > 0) { print f, l; n++ }
        close(f)
        if (r < 0) print "cannot read " f > "/dev/stderr"
        else if (n == 0) print f
    }
}
'
# sysctl dump: "key = value" as sysctl -a prints it, from /proc/sys files
SYSCTL_AWK='
BEGIN {
    while ((getline f < list) > 0) {
        if (f == "") continue
        k = f; sub(/^\/proc\/sys\//, "", k); gsub(/\//, ".", k)
        while ((r = (getline l < f)) > 0) print k " = " l
        close(f)
    }
}
'
# mask secrets in command lines and environments
MASK_AWK='
function mask(s, re, spaced, url,    lo, out, vl, st) {
    out = ""
    lo = tolower(s)
    while (match(lo, re)) {
        st = RSTART + RLENGTH - 1
        out = out substr(s, 1, st)
        s = substr(s, st + 1); lo = substr(lo, st + 1)
        if (spaced) { match(s, /^[ \t]+/); if (RSTART == 1) { out = out substr(s, 1, RLENGTH); s = substr(s, RLENGTH + 1); lo = substr(lo, RLENGTH + 1) } }
        if (url) { match(s, /^[^@ \t\/]*@/); vl = RLENGTH - 1 } else { match(s, /^[^ \t&;,]*/); vl = RLENGTH }
        if (vl > 0) { out = out "***"; s = substr(s, vl + 1); lo = substr(lo, vl + 1) }
    }
    return out s
}
{
    line = " " $0
    line = mask(line, "--?[a-z0-9_.-]*(passw|passphrase|secret|token|api[-_]?key|access[-_]?key|private[-_]?key|credential)[a-z0-9_.-]*[=:]", 0)
    line = mask(line, "--?[a-z0-9_.-]*(passw|passphrase|secret|token|api[-_]?key|credential)[a-z0-9_.-]*[ \t]", 1)
    line = mask(line, "[ \t\"]([a-z0-9_.-]*)(token|key|secret|passw|credential|auth)[a-z0-9_.-]*=", 0)
    line = mask(line, "[a-z][a-z0-9+.-]*://[^/@ \t:]*:", 0, 1)
    print substr(line, 2)
}
'

# top consumers from /proc/*/stat: average CPU since start, and RSS
TOP_AWK='
BEGIN {
    getline up < "/proc/uptime"; split(up, u, " "); up = u[1] + 0; close("/proc/uptime")
    n = 0
    while ((getline f < list) > 0) {
        if ((getline l < f) > 0) {
            close(f)
            rp = 0; for (i = length(l); i > 0; i--) if (substr(l, i, 1) == ")") { rp = i; break }
            if (rp == 0) continue
            pid = l + 0
            m = split(substr(l, rp + 2), a, " ")
            if (m < 22 || a[3] == pgrp || pid == self) continue
            rss = a[22] + 0
            age = up - a[20] / hz
            if (rss == 0 || age < 2) continue
            n++; P[n] = pid; C[n] = (a[12] + a[13]) / hz / age; S[n] = rss
        } else close(f)
    }
    for (k = 1; k <= ncpu && k <= n; k++) { b = 0; for (i = 1; i <= n; i++) if (!(i in U) && (b == 0 || C[i] > C[b])) b = i; U[b] = 1; print P[b] }
    for (k = 1; k <= nrss && k <= n; k++) { b = 0; for (i = 1; i <= n; i++) if (!(i in V) && (b == 0 || S[i] > S[b])) b = i; V[b] = 1; if (!(b in U)) print P[b] }
}
'

# cgroup directories for --cgroup specs and /proc/PID/cgroup lines
CGROUP_AWK='
function unesc(s) { gsub(/\\040/, " ", s); return s }
function emit(d) { if (d != "" && !(d in OUT)) { OUT[d] = 1; print d } }
function allmounts(rel,    c) {
    if (rel == "/" || rel == "") return
    if (v2 != "") emit(v2 rel)
    for (c in M1) emit(M1[c] rel)
}
BEGIN {
    FS = "\t"
    split("cpu cpuacct memory blkio cpuset pids", w, " "); for (i in w) WANT[w[i]] = 1
    while ((getline l < "/proc/self/mounts") > 0) {
        split(l, f, " ")
        if (f[3] == "cgroup2" && v2 == "") v2 = unesc(f[2])
        else if (f[3] == "cgroup") { k = split(f[4], o, ","); for (i = 1; i <= k; i++) if (o[i] in WANT) M1[o[i]] = unesc(f[2]) }
    }
}
$1 == "rel" {
    p = $2
    if (substr(p, 1, 1) != "/") p = "/" p
    rel = p
    if (v2 != "" && index(p, v2 "/") == 1) rel = substr(p, length(v2) + 1)
    for (c in M1) if (index(p, M1[c] "/") == 1) rel = substr(p, length(M1[c]) + 1)
    if (rel != p) emit(p)
    allmounts(rel)
}
$1 == "pid" {
    s = $2
    i = index(s, ":"); s = substr(s, i + 1); i = index(s, ":")
    ctrls = substr(s, 1, i - 1); path = substr(s, i + 1)
    if (path == "/" || path == "") next
    if (ctrls == "") { if (v2 != "") emit(v2 path) }
    else { k = split(ctrls, o, ","); for (j = 1; j <= k; j++) if (o[j] in M1) emit(M1[o[j]] path) }
}
'

# NTP state from chronyc tracking / timedatectl / ntpq output -> "sync offset"
NTP_AWK='
src == "chronyc" && /^System time/ { v = $4 + 0; off = ($6 == "slow") ? -v : v; have = 1 }
src == "chronyc" && /^Leap status/ { sync = ($0 ~ /Not synchronised/) ? "false" : "true" }
src == "timedatectl" && /^NTPSynchronized=/ { sync = ($0 ~ /=yes/) ? "true" : "false" }
src == "timedatectl" && /(System clock|NTP) synchronized:/ { sync = ($NF == "yes") ? "true" : "false" }
src == "timedatectl" && /^ *Offset:/ { v = $2; u = v; sub(/^[-+0-9.]+/, "", u); sub(/[a-z]+$/, "", v); f = (u == "us") ? 1e-6 : (u == "ms") ? 1e-3 : (u == "ns") ? 1e-9 : 1; off = v * f; have = 1 }
src == "ntpq" && /^\*/ { sync = "true"; off = $9 / 1000; have = 1 }
END {
    if (src == "ntpq" && sync == "") sync = "false"
    printf "%s %s\n", (sync == "" ? "null" : sync), (have ? sprintf("%.9f", off) : "null")
}
'

# bpftrace programs (the same text as capture/bpftrace/*.bt; a test checks it)
RUNQLAT_BT='/*
 * runqlat.bt - Hindsight run-queue (scheduler) latency histogram.
 *
 * Time from a task becoming runnable (wakeup, or preempted while running)
 * until it runs on a CPU, in microseconds. Every 10 s prints one line
 * with the UTC time (the capture runs bpftrace under TZ=UTC0), then the
 * histogram, then clears it. Approach of bpftrace tools/runqlat.bt.
 * Uses tracepoints only (no kernel headers needed); TASK_RUNNING is 0.
 */

BEGIN
{
	printf("hindsight runqlat: run-queue latency in microseconds, histogram every 10 s\n");
}

tracepoint:sched:sched_wakeup,
tracepoint:sched:sched_wakeup_new
{
	@qtime[args->pid] = nsecs;
}

tracepoint:sched:sched_switch
{
	if (args->prev_state == 0) {
		@qtime[args->prev_pid] = nsecs;
	}
	$ns = @qtime[args->next_pid];
	if ($ns) {
		@usecs = hist((nsecs - $ns) / 1000);
	}
	delete(@qtime[args->next_pid]);
}

interval:s:10
{
	time("%Y-%m-%dT%H:%M:%SZ\n");
	print(@usecs);
	clear(@usecs);
}

END
{
	clear(@qtime);
	clear(@usecs);
}'
BIOLAT_BT='/*
 * biolat.bt - Hindsight block I/O latency histogram, per disk.
 *
 * Time from issue to the driver until completion of each block request,
 * in microseconds, keyed by the disk major and minor number
 * (@usecs[259, 0] is nvme0n1 on most hosts; see snap/lsblk). Every 10 s
 * prints one line with the UTC time, then the histograms, then clears them.
 * Uses the block tracepoints only (stable across kernels; no headers).
 */

BEGIN
{
	printf("hindsight biolat: block I/O latency in microseconds per major, minor; histogram every 10 s\n");
}

tracepoint:block:block_rq_issue
{
	@start[args->dev, args->sector] = nsecs;
}

tracepoint:block:block_rq_complete
/@start[args->dev, args->sector]/
{
	@usecs[args->dev >> 20, args->dev & 0xfffff] = hist((nsecs - @start[args->dev, args->sector]) / 1000);
	delete(@start[args->dev, args->sector]);
}

interval:s:10
{
	time("%Y-%m-%dT%H:%M:%SZ\n");
	print(@usecs);
	clear(@usecs);
}

END
{
	clear(@start);
	clear(@usecs);
}'
STACKS_BT='/*
 * stacks.bt - Hindsight sampled on-CPU stacks, per process.
 *
 * Samples every CPU 49 times a second (49, not 50: not in step with
 * timers) and counts the user and kernel stack of the task on it, keyed
 * by process name and PID; idle CPUs (pid 0) are not counted. Prints the
 * UTC time at the start, then every 10 s the time, @samples (all samples
 * of the slice) and the 200 most frequent stacks, then clears them (the
 * last, shorter slice is not printed: bpftrace 0.17 loses what END
 * prints at a signal). Bounded: at most 200 stacks per slice, 24 user and
 * 16 kernel frames each (docs/capture.md).
 */

BEGIN
{
	printf("hindsight stacks: on-CPU stacks at 49 Hz per CPU, top 200 every 10 s\n");
	time("%Y-%m-%dT%H:%M:%SZ\n");
}

profile:hz:49
/pid != 0/
{
	@stacks[comm, pid, ustack(perf, 24), kstack(perf, 16)] = count();
	@samples = count();
}

interval:s:10
{
	time("%Y-%m-%dT%H:%M:%SZ\n");
	print(@samples);
	print(@stacks, 200);
	clear(@samples);
	clear(@stacks);
}

END
{
	clear(@samples);
	clear(@stacks);
}'

# ---------------------------------------------------------------- arguments
parse_args() {
    while [ $# -gt 0 ]; do
        case $1 in
        -d | --duration | -i | --interval | -o | --out | --pid | --cgroup | --max-mb | --min-free-mb | --history-hours | \
            --irq-interval | --ring | --trigger | --cooldown | --max-dumps | --app-metrics | --app-log | --app-pattern)
            [ $# -ge 2 ] || {
                usage >&2
                die "$1 needs a value"
            }
            set_opt "$1" "$2"
            shift 2
            ;;
        --duration=* | --interval=* | --out=* | --pid=* | --cgroup=* | --max-mb=* | --min-free-mb=* | --history-hours=* | \
            --irq-interval=* | --ring=* | --trigger=* | --cooldown=* | --max-dumps=* | --app-metrics=* | \
            --app-log=* | --app-pattern=*)
            set_opt "${1%%=*}" "${1#*=}"
            shift
            ;;
        -d?* | -i?* | -o?*)
            set_opt "$(printf '%.2s' "$1")" "${1#-?}"
            shift
            ;;
        --no-bpf) NO_BPF=true && shift ;;
        --no-stacks) NO_STACKS=true && shift ;;
        --no-gpu) NO_GPU=true && shift ;;
        --safe-mode) SAFE_MODE=true && shift ;;
        --iostat-json) IOSTAT_JSON=true && shift ;;
        --dump) DUMP_CLIENT=1 && shift ;;
        -h | --help)
            usage
            exit 0
            ;;
        --version)
            echo "hindsight-capture $CAPTURE_VERSION (bundle format $FORMAT_VERSION)"
            exit 0
            ;;
        *)
            usage >&2
            die "unknown argument: $1"
            ;;
        esac
    done
}
set_opt() {
    case $1 in
    -d | --duration)
        is_uint "$2" || die "duration must be whole seconds: $2"
        DURATION=$2
        ;;
    -i | --interval)
        if ! is_uint "$2" || [ "$2" -lt 1 ]; then die "interval must be whole seconds >= 1: $2"; fi
        INTERVAL=$2
        ;;
    -o | --out) OUT_PARENT=$2 ;;
    --pid)
        is_uint "$2" || die "--pid needs a numeric PID: $2"
        PIDS="${PIDS:+$PIDS }$2"
        ;;
    --cgroup) CGROUP_SPECS="$CGROUP_SPECS$2$NL" ;;
    --max-mb)
        is_uint "$2" || die "--max-mb needs a number: $2"
        MAX_MB=$2
        ;;
    --min-free-mb)
        is_uint "$2" || die "--min-free-mb needs a number: $2"
        MIN_FREE_MB=$2
        ;;
    --history-hours)
        is_uint "$2" || die "--history-hours needs a number of hours: $2"
        HISTORY_HOURS=$2
        ;;
    --irq-interval)
        if ! is_uint "$2" || [ "$2" -lt 1 ]; then die "--irq-interval needs whole seconds >= 1: $2"; fi
        IRQ_INTERVAL=$2
        ;;
    --ring)
        if ! is_uint "$2" || [ "$2" -lt 1 ]; then die "--ring needs whole minutes >= 1: $2"; fi
        RING_MIN=$2
        ;;
    --trigger) TRIGGERS="$TRIGGERS$2$NL" ;;
    --cooldown)
        is_uint "$2" || die "--cooldown needs seconds: $2"
        COOLDOWN=$2
        ;;
    --max-dumps)
        is_uint "$2" || die "--max-dumps needs a number: $2"
        MAX_DUMPS=$2
        ;;
    --app-metrics)
        case $2 in
        *[![:graph:]]*) die "--app-metrics URL must be printable, without spaces: $2" ;;
        http://?* | https://?*) APP_URLS="$APP_URLS$2$NL" ;;
        *) die "--app-metrics needs an http:// or https:// URL: $2" ;;
        esac
        ;;
    --app-log)
        case $2 in
        '' | *"$NL"*) die "--app-log needs a file name (no newlines)" ;;
        /*) APP_LOGS="$APP_LOGS$2$NL" ;;
        *) APP_LOGS="$APP_LOGS$(pwd)/$2$NL" ;; # the capture runs in its own directory
        esac
        ;;
    --app-pattern)
        case $2 in '' | *"$NL"*) die "--app-pattern needs a regular expression (ERE, one line)" ;; esac
        APP_PATTERNS="$APP_PATTERNS$2$NL"
        ;;
    esac
}

# ---------------------------------------------------------------- setup
detect_features() {
    _d=$(date +%N 2>/dev/null)
    case $_d in '' | *[!0-9]*) DATE_FMT=+%s ;; *) DATE_FMT=+%s.%N ;; esac
    TIMEOUT_K=
    if have_cmd timeout; then
        if timeout -k 1 5 true 2>/dev/null; then TIMEOUT_K=1; fi
        HAVE_TIMEOUT=1
    else
        HAVE_TIMEOUT=
        say "no 'timeout' command: one-shot commands are not time-limited (waits are still bounded)"
    fi
    USE_NICE=
    if have_cmd nice && nice -n 19 true 2>/dev/null; then USE_NICE=1; fi
    USE_IONICE=
    if have_cmd ionice && ionice -c 3 true 2>/dev/null; then USE_IONICE=1; fi
    USE_STDBUF=
    if have_cmd stdbuf && stdbuf -oL true 2>/dev/null; then USE_STDBUF=1; fi
    AWK_INTERACTIVE='' AWK_WRITE_ERRORS=''
    case $(awk -W version 2>&1 </dev/null) in
    *mawk*) AWK_INTERACTIVE=1 AWK_WRITE_ERRORS=1 ;;
    *"GNU Awk"*) AWK_WRITE_ERRORS=1 ;;
    esac
    FRACTIONAL_SLEEP=
    if sleep 0.01 2>/dev/null; then FRACTIONAL_SLEEP=1; fi
    CMD_TIMEOUT=${HINDSIGHT_CMD_TIMEOUT:-}
    if [ -n "$CMD_TIMEOUT" ] && ! is_uint "$CMD_TIMEOUT"; then CMD_TIMEOUT=; fi
}

host_facts() {
    HOSTNAME_=
    read -r HOSTNAME_ </proc/sys/kernel/hostname 2>/dev/null
    [ -n "$HOSTNAME_" ] || HOSTNAME_=$(uname -n)
    KERNEL=
    read -r KERNEL </proc/sys/kernel/osrelease 2>/dev/null
    [ -n "$KERNEL" ] || KERNEL=$(uname -r)
    ARCH=$(uname -m)
    OS=
    for _f in /etc/os-release /usr/lib/os-release; do
        [ -r "$_f" ] || continue
        while IFS= read -r _l || [ -n "$_l" ]; do
            case $_l in PRETTY_NAME=*)
                OS=${_l#PRETTY_NAME=}
                OS=${OS#\"}
                OS=${OS%\"}
                ;;
            esac
        done <"$_f"
        break
    done
    CPUS=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo)
    USER_ID=$(id -u)
    if [ "$USER_ID" = 0 ]; then IS_ROOT=true; else IS_ROOT=false; fi
    # IANA timezone of the host (the collectors themselves run in UTC)
    TIMEZONE=
    if [ -n "$ORIG_TZ" ]; then TIMEZONE=${ORIG_TZ#:}; fi
    if [ -z "$TIMEZONE" ] && [ -r /etc/timezone ]; then read -r TIMEZONE </etc/timezone || true; fi
    if [ -z "$TIMEZONE" ] && [ -L /etc/localtime ]; then
        _z=$(readlink /etc/localtime 2>/dev/null)
        case $_z in *zoneinfo/*) TIMEZONE=${_z#*zoneinfo/} ;; esac
    fi
    if [ -z "$TIMEZONE" ] && have_cmd timedatectl; then
        TIMEZONE=$(run_limited 5 timedatectl show -p Timezone --value 2>/dev/null) || TIMEZONE=
    fi
    if [ -n "$ORIG_TZ" ]; then
        UTC_OFFSET=$(TZ=$ORIG_TZ date +%z)
    else
        UTC_OFFSET=$(
            unset TZ
            date +%z
        )
    fi
}

# run a short command in the foreground under timeout (helpers only)
run_limited() {
    _lim=$1
    shift
    if [ -n "$HAVE_TIMEOUT" ]; then timeout "$_lim" "$@"; else "$@"; fi
}

make_workdir() {
    _stamps=$(date -u '+%Y%m%dT%H%M%SZ %Y-%m-%dT%H:%M:%SZ')
    STAMP=${_stamps% *}
    START_UTC=${_stamps#* }
    _h=$(printf '%s' "$HOSTNAME_" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-64)
    [ -n "$_h" ] || _h=unknown
    mkdir -p "$OUT_PARENT" 2>/dev/null || die "cannot create output directory $OUT_PARENT"
    OUT_ABS=$(cd "$OUT_PARENT" && pwd) || die "cannot enter output directory $OUT_PARENT"
    HOST_TAG=$_h
    NAME=hindsight-$_h-$STAMP
    _n=1
    while [ -z "$RING_MIN" ] && { [ -e "$OUT_ABS/$NAME" ] || [ -e "$OUT_ABS/$NAME.tgz" ]; }; do
        _n=$((_n + 1))
        NAME=hindsight-$_h-$STAMP-$_n
    done
    if [ -n "$RING_MIN" ]; then
        NAME=hindsight-recorder-$_h
        if [ -f "$OUT_ABS/$NAME/recorder.pid" ]; then
            read -r _p <"$OUT_ABS/$NAME/recorder.pid" || _p=
            if is_uint "$_p" && kill -0 "$_p" 2>/dev/null; then die "a flight recorder already runs in $OUT_ABS/$NAME (pid $_p)"; fi
            rm -rf "${OUT_ABS:?}/$NAME"
        elif [ -e "$OUT_ABS/$NAME" ]; then
            die "$OUT_ABS/$NAME exists and is not a flight recorder directory"
        fi
    fi
    mkdir "$OUT_ABS/$NAME" 2>/dev/null || die "cannot write in $OUT_ABS (permissions? try -o /var/tmp)"
    WORK=$OUT_ABS/$NAME
    cd "$WORK" || die "cannot enter $WORK"
    mkdir series snap .state || die "cannot create directories in $WORK"
    LOG=$WORK/capture.log
    : >"$LOG"
    TMPDIR=$WORK/.state
    export TMPDIR
}

# ---------------------------------------------------------------- running things
# spawn LIMIT OUT ERR STATUSFILE CMD...: background wrapper that runs CMD under
# timeout/nice/ionice, forwards SIGTERM to it and writes "rc=N" when it ends.
spawn() {
    _lim=$1 _out=$2 _err=$3 _st=$4 _extra_st=$SPAWN_EXTRA_ST
    SPAWN_EXTRA_ST=''
    shift 4
    # one-shot snapshots are short reads: nice only; series also get ionice
    if [ -n "$USE_IONICE" ] && [ "$_lim" -ge "${SERIES_LIMIT:-999999}" ]; then set -- ionice -c 3 "$@"; fi
    if [ -n "$USE_NICE" ]; then set -- nice -n 19 "$@"; fi
    if [ -n "$HAVE_TIMEOUT" ]; then
        if [ -n "$TIMEOUT_K" ]; then set -- timeout -k 3 "$_lim" "$@"; else set -- timeout "$_lim" "$@"; fi
    fi
    # shellcheck disable=SC2086 # a list of our own paths without spaces
    rm -f "$_st" $_extra_st
    (
        _stop=
        trap '_stop=1' TERM
        if [ -n "$RING_MIN" ]; then "$@" >"$_out" 2>>"$_err" </dev/null & else "$@" >"$_out" 2>"$_err" </dev/null & fi
        _c=$!
        trap 'kill -TERM "$_c" 2>/dev/null' TERM
        if [ -n "$_stop" ]; then kill -TERM "$_c" 2>/dev/null; fi
        while :; do
            wait "$_c"
            _rc=$?
            kill -0 "$_c" 2>/dev/null || break
        done
        printf 'rc=%s\n' "$_rc" >"$_st"
        for _x in $_extra_st; do printf 'rc=%s\n' "$_rc" >"$_x"; done
    ) 2>/dev/null &
    SPAWN_PID=$!
}

# wait (interruptibly, bounded) until a status file appears
await_status() {
    _f=$1 _lim10=$(($2 * 10)) _t=0
    for _s in 0.02 0.05 0.1 0.2 0.3; do
        [ -e "$_f" ] && return 0
        if [ -n "$FRACTIONAL_SLEEP" ]; then nap "$_s"; else break; fi
    done
    _t=7
    while [ ! -e "$_f" ]; do
        [ "$_t" -ge "$_lim10" ] && return 1
        if [ -n "$FRACTIONAL_SLEEP" ]; then
            nap 0.5
            _t=$((_t + 5))
        else
            nap 1
            _t=$((_t + 10))
        fi
    done
    return 0
}

# probe LIMIT CMD...: run CMD in the background, wait (bounded); true when it exits 0
probe() {
    _plim=$1
    shift
    spawn "$_plim" /dev/null /dev/null .state/probe.status "$@"
    ONESHOT_PID=$SPAWN_PID
    if await_status .state/probe.status $((_plim + 5)); then
        read -r _pl <.state/probe.status || { disk_full_check || true; _pl=rc=1; }
        wait "$ONESHOT_PID" 2>/dev/null
        ONESHOT_PID=''
        [ "${_pl#rc=}" = 0 ]
        return
    fi
    ONESHOT_PID=''
    printf 'timeout: %s\n' "$*" >>"$LOG"
    GPU_HUNG=1
    return 1
}

# snap NAME TOOL LIMIT_S CMD...: one-shot snapshot into snap/NAME.PHASE.out
snap() {
    _name=$1 _tool=$2 _slim=$3
    shift 3
    [ -n "$CMD_TIMEOUT" ] && _slim=$CMD_TIMEOUT
    _stem=snap/$_name.$PHASE
    if [ -n "$SNAP_CMD" ]; then
        _cmd=$SNAP_CMD
        SNAP_CMD=''
    else
        cmdline "$@"
        _cmd=$CMDLINE
    fi
    if [ "$_tool" = nvidia_smi ] && [ -n "$GPU_HUNG" ]; then
        reg_off "$_name.$PHASE" snapshot "$_tool" skipped "nvidia-smi did not answer earlier in this capture" "$_cmd"
        return 1
    fi
    if [ -n "$DISK_STOPPED" ]; then
        reg_off "$_name.$PHASE" snapshot "$_tool" skipped "the output filesystem is full ($STOP_REASON)" "$_cmd"
        return 1
    fi
    spawn "$_slim" "$_stem.out" "$_stem.err" "$_stem.status" "$@"
    ONESHOT_PID=$SPAWN_PID
    _reason=
    if await_status "$_stem.status" $((_slim + 5)); then
        _l=
        read -r _l <"$_stem.status" || _l=
        wait "$ONESHOT_PID" 2>/dev/null
        if [ -z "$_l" ] && disk_full_check; then
            # its status could not be written: the disk filled up while it ran
            rm -f "$_stem.status"
            _l=full
        fi
        _rc=${_l#rc=}
        case $_l in
        full) _rc='' _state=failed _reason="the output filesystem filled up while it ran: output cut short, exit status lost" ;;
        '') _rc=1 _state=failed ;;
        *) case $_rc in
            0) _state=ok ;;
            124 | 137) _state=timeout _reason="no answer within ${_slim} s" ;;
            *) _state=failed ;;
            esac ;;
        esac
    else
        _rc='' _state=timeout _reason="did not exit after kill (stuck in the kernel?); abandoned"
        printf 'abandoned\n' >"$_stem.status"
    fi
    ONESHOT_PID=
    if [ "$_state" = timeout ] && [ "$_tool" = nvidia_smi ]; then GPU_HUNG=1; fi
    reg "$_name.$PHASE" snapshot "$_tool" "$_stem.out" "$_stem.err" "$_stem.status" "$_state" "$_rc" "$_reason" "" "$_cmd"
    [ "$_state" = ok ]
}

# snap_cmd NAME TOOL LIMIT CMD...: like snap, but records 'missing' without CMD
snap_cmd() {
    if have_cmd "$4"; then
        snap "$@"
    else
        reg_off "$1.$PHASE" snapshot "$2" missing "command not found: $4" "$4"
        return 1
    fi
}

# snap_files NAME TOOL AWKPROG FILE...: dump the existing files with one awk
snap_files() {
    _name=$1 _tool=$2 _prog=$3
    shift 3
    _list=.state/$_name.$PHASE.list
    : >"$_list"
    for _f in "$@"; do
        if [ -f "$_f" ]; then printf '%s\n' "$_f" >>"$_list"; fi
    done
    if [ ! -s "$_list" ]; then
        reg_off "$_name.$PHASE" snapshot "$_tool" skipped "none of its files exist on this host" "read $1 ..."
        return 1
    fi
    SNAP_CMD="read $(wc -l <"$_list" | tr -d ' ') files: $*"
    snap "$_name" "$_tool" 15 awk -v list="$_list" "$_prog"
}

# series NAME TOOL FLAGS CMD...: start a time-series collector in the background
series() {
    _name=$1 _tool=$2 _flags=$3
    shift 3
    if [ -n "$_cmd_override" ]; then
        _cmd=$_cmd_override
    else
        cmdline "$@"
        _cmd=$CMDLINE
    fi
    _cmd_override=
    if [ -n "$DISK_STOPPED" ]; then
        reg_off "$_name" series "$_tool" skipped "the output filesystem is full ($STOP_REASON)" "$_cmd"
        return 0
    fi
    if [ -n "$RING_MIN" ]; then
        ring_mode_of "$_name"
        spawn "$SERIES_LIMIT" /dev/null "series/$_name.err" "series/$_name.status" \
            sh -c "$RING_SH" hindsight-ring "$_name" "$RING_MODE" "$RING_AWK" "$@"
    else
        spawn "$SERIES_LIMIT" "series/$_name.out" "series/$_name.err" "series/$_name.status" "$@"
    fi
    SERIES_PIDS="$SERIES_PIDS $SPAWN_PID:$_name:$_flags"
    reg "$_name" series "$_tool" "series/$_name.out" "series/$_name.err" "series/$_name.status" running "" "" "$_flags" "$_cmd"
}

# sampler NAME LISTFILE: register a sampler collector; start_samplers runs them all
sampler() {
    SAMPLERS="${SAMPLERS:+$SAMPLERS }$1=$2"
}
start_samplers() {
    [ -n "$SAMPLERS" ] || return 0
    if [ -n "$DISK_STOPPED" ]; then
        for _e in $SAMPLERS; do
            reg_off "${_e%%=*}" series "${_e%%=*}" skipped "the output filesystem is full ($STOP_REASON)" ""
        done
        return 0
    fi
    _ring=0
    [ -n "$RING_MIN" ] && _ring=1
    set -- -v lists="$SAMPLERS" -v ring="$_ring" -v slot_s="${RING_SLOT_S:-1}" -v nkeep="${RING_KEEP:-0}" \
        -v main="$$" -v trigs=.state/triggers -v fired=.state/fired "$SAMPLER_AWK"
    if [ -n "$AWK_INTERACTIVE" ]; then set -- awk -W interactive "$@"; else set -- awk "$@"; fi
    _first=''
    _extra=''
    for _e in $SAMPLERS; do
        _m=${_e%%=*}
        if [ -z "$_first" ]; then _first=$_m; else _extra="$_extra series/$_m.status"; fi
    done
    SPAWN_EXTRA_ST=$_extra
    # the process's own stderr goes to the first sampler's .err; read errors go to each one's
    spawn "$SERIES_LIMIT" /dev/null "series/$_first.err" "series/$_first.status" \
        sh -c "$TICKER_SH" hindsight-ticker "$INTERVAL" "$DATE_FMT" "$$" .state/stop "$MAX_TICKS" "$@"
    for _e in $SAMPLERS; do
        _m=${_e%%=*}
        [ "$_m" = "$_first" ] || : >"series/$_m.err"
        SERIES_PIDS="$SERIES_PIDS $SPAWN_PID:$_m:"
        _n=$(wc -l <"${_e#*=}" | tr -d ' ')
        reg "$_m" series "$_m" "series/$_m.out" "series/$_m.err" "series/$_m.status" running "" "" "" \
            "sampler (one process for all samplers): every ${INTERVAL} s read $_n files, see bundle-format.md"
    done
}

# ---------------------------------------------------------------- manifest
write_manifest() {
    _complete=${1:-0}
    _up=$(date -u '+%Y-%m-%dT%H:%M:%SZ')
    meta updated_utc s "$_up"
    ls -ln series snap snap/pstore history >.state/sizes 2>/dev/null
    _sum=
    [ "$_complete" = 1 ] && _sum=.state/summary && : >"$_sum"
    # mawk and gawk exit non-zero when a write fails; other awks (busybox) may not, so
    # there the end of the file is checked
    if awk -v complete="$_complete" -v interrupted="$INTERRUPTED" -v stopped="$STOPPED" -v summary="$_sum" -v dump="${DUMPING:-0}" -v first_slot="${FIRST_SLOT:-0}" \
        -v sigrc="$STOP_SIGRC" "$MANIFEST_AWK" .state/meta .state/reg .state/sizes >manifest.json.tmp 2>>"$LOG" &&
        { [ -n "$AWK_WRITE_ERRORS" ] || [ "$(tail -c 2 manifest.json.tmp 2>/dev/null)" = "}" ]; }; then
        mv -f manifest.json.tmp manifest.json
    else
        rm -f manifest.json.tmp
        err "could not write manifest.json"
        [ "$_complete" = 1 ] || disk_full_check || true
    fi
}

# ---------------------------------------------------------------- clock
clock_snapshot() {
    _ph=$1
    _e=$(date "$DATE_FMT")
    read -r _upf _ </proc/uptime
    _utc=$(date -u '+%Y-%m-%dT%H:%M:%SZ')
    _boot=$(awk -v e="$_e" -v u="$_upf" 'BEGIN { printf "%.3f", e - u }')
    if [ -n "$ORIG_TZ" ]; then
        _local=$(TZ=$ORIG_TZ date '+%Y-%m-%dT%H:%M:%S%z')
    else
        _local=$(
            unset TZ
            date '+%Y-%m-%dT%H:%M:%S%z'
        )
    fi
    _cs=
    read -r _cs </sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || _cs=
    # NTP state: the first time source tool found answers
    _src=none
    PHASE=$_ph
    if have_cmd chronyc; then
        _src=chronyc
        snap ntp chronyc 10 chronyc -n tracking
    elif have_cmd timedatectl; then
        _src=timedatectl
        snap ntp timedatectl 10 timedatectl show || [ -n "$DISK_STOPPED" ] || snap ntp timedatectl 10 timedatectl status
        if [ -e /run/systemd/timesync/synchronized ]; then printf 'NTPSynchronized=yes\n' >>"snap/ntp.$_ph.out"; fi
    elif have_cmd ntpq; then
        _src=ntpq
        snap ntp ntpq 10 ntpq -pn
    else
        reg_off "ntp.$_ph" snapshot ntp missing "no chronyc, timedatectl or ntpq" ""
    fi
    _ntp="null null"
    if [ "$_src" != none ] && [ -s "snap/ntp.$_ph.out" ]; then
        _ntp=$(awk -v src="$_src" "$NTP_AWK" "snap/ntp.$_ph.out")
    fi
    _sync=${_ntp% *}
    _off=${_ntp#* }
    {
        printf 'epoch_s=%s\nuptime_s=%s\nboot_epoch_s=%s\nutc=%s\nlocal=%s\n' "$_e" "$_upf" "$_boot" "$_utc" "$_local"
        printf 'timezone=%s\nutc_offset=%s\nclocksource=%s\n' "$TIMEZONE" "$UTC_OFFSET" "$_cs"
        printf 'ntp_source=%s\nntp_synchronized=%s\nntp_offset_s=%s\n' "$_src" "$_sync" "$_off"
    } >"snap/clock.$_ph.out"
    printf 'rc=0\n' >"snap/clock.$_ph.status"
    reg "clock.$_ph" snapshot clock "snap/clock.$_ph.out" "" "snap/clock.$_ph.status" ok 0 "" "" "date $DATE_FMT; cat /proc/uptime"
    meta "${_ph}_epoch_s" n "$_e"
    meta "${_ph}_uptime_s" n "$_upf"
    if [ "$_ph" = start ]; then
        BOOT_EPOCH=$_boot START_EPOCH=$_e
        meta boot_epoch_s n "$_boot"
        meta clocksource s "$_cs"
        meta ntp_source s "$_src"
        meta ntp_synchronized b "$_sync"
        meta ntp_offset_s n "$_off"
    else
        meta end_utc s "$_utc"
    fi
}

# ---------------------------------------------------------------- targets
resolve_targets() {
    PIDS_AUTO=false
    if [ -z "$PIDS" ]; then
        PIDS_AUTO=true
        : >.state/top.list
        for _p in /proc/[0-9]*; do printf '%s/stat\n' "$_p" >>.state/top.list; done
        _hz=$(getconf CLK_TCK 2>/dev/null) || _hz=100
        is_uint "$_hz" || _hz=100
        read -r _ _ _ _ _pg _ </proc/self/stat || _pg=0
        TOP_PIDS=$(run_limited 15 awk -v list=.state/top.list -v hz="$_hz" -v self="$$" -v pgrp="$_pg" \
            -v ncpu=10 -v nrss=5 "$TOP_AWK" 2>/dev/null | tr '\n' ' ')
        for _p in $TOP_PIDS; do PIDS="${PIDS:+$PIDS }$_p"; done
        say "no --pid given: following the top consumers by CPU and RSS: ${PIDS:-none}"
    else
        for _p in $PIDS; do
            [ -d "/proc/$_p" ] || say "warning: PID $_p does not exist"
        done
    fi
    # cgroups: --cgroup specs, plus the cgroups of each target PID
    : >.state/cgspec
    _old_ifs=$IFS
    IFS=$NL
    for _c in $CGROUP_SPECS; do
        [ -n "$_c" ] && printf 'rel\t%s\n' "$_c" >>.state/cgspec
    done
    IFS=$_old_ifs
    _k=0
    for _p in $PIDS; do
        _k=$((_k + 1))
        # automatic targets: only the cgroups of the three biggest CPU consumers
        [ "$PIDS_AUTO" = true ] && [ "$_k" -gt 3 ] && break
        if [ -r "/proc/$_p/cgroup" ]; then
            while IFS= read -r _l; do printf 'pid\t%s\n' "$_l" >>.state/cgspec; done <"/proc/$_p/cgroup"
        fi
    done
    : >.state/cgdirs
    awk "$CGROUP_AWK" .state/cgspec 2>/dev/null | while IFS= read -r _d; do
        if [ -d "$_d" ]; then printf '%s\n' "$_d" >>.state/cgdirs; fi
    done
    CG_COUNT=$(wc -l <.state/cgdirs | tr -d ' ')
    # shellcheck disable=SC2086 # PIDS is a list of numbers
    meta_list pids $PIDS
    meta pids_auto b "$PIDS_AUTO"
    set --
    while IFS= read -r _d; do set -- "$@" "$_d"; done <.state/cgdirs
    meta_list cgroups "$@"
    [ "$CG_COUNT" -gt 0 ] && say "following $CG_COUNT cgroup directories (list in manifest targets.cgroups)"
    return 0
}

# list files: add_files LIST FILE... (only those that exist)
add_files() {
    _lf=$1
    shift
    for _f in "$@"; do
        if [ -r "$_f" ] && [ -f "$_f" ]; then printf '%s\n' "$_f" >>"$_lf"; fi
    done
}
# the per-cgroup file lists for the samplers and the limit snapshots
cgroup_lists() {
    : >.state/cgroup.list
    : >.state/cgpsi.list
    : >.state/cglimits.list
    while IFS= read -r _d; do
        add_files .state/cgroup.list "$_d/cpu.stat" "$_d/cpuacct.usage" "$_d/memory.current" "$_d/memory.swap.current" \
            "$_d/memory.events" "$_d/memory.usage_in_bytes" "$_d/memory.max_usage_in_bytes" "$_d/memory.failcnt" \
            "$_d/memory.oom_control" "$_d/memory.stat" "$_d/io.stat" "$_d/blkio.throttle.io_service_bytes" \
            "$_d/blkio.throttle.io_serviced" "$_d/pids.current"
        add_files .state/cgpsi.list "$_d/cpu.pressure" "$_d/memory.pressure" "$_d/io.pressure" "$_d/irq.pressure"
        add_files .state/cglimits.list "$_d/cpu.max" "$_d/cpu.weight" "$_d/cpu.max.burst" "$_d/cpuset.cpus.effective" \
            "$_d/cpuset.mems.effective" "$_d/memory.max" "$_d/memory.high" "$_d/memory.low" "$_d/memory.min" \
            "$_d/memory.swap.max" "$_d/memory.oom.group" "$_d/io.max" "$_d/io.weight" "$_d/pids.max" \
            "$_d/cpu.cfs_quota_us" "$_d/cpu.cfs_period_us" "$_d/cpu.shares" "$_d/cpuset.cpus" "$_d/cpuset.mems" \
            "$_d/memory.limit_in_bytes" "$_d/memory.soft_limit_in_bytes" "$_d/memory.memsw.limit_in_bytes" \
            "$_d/blkio.throttle.read_bps_device" "$_d/blkio.throttle.write_bps_device" \
            "$_d/blkio.throttle.read_iops_device" "$_d/blkio.throttle.write_iops_device"
    done <.state/cgdirs
}

# ---------------------------------------------------------------- time series
start_series() {
    _n=$((DURATION / INTERVAL))
    [ "$_n" -ge 1 ] || _n=1
    if [ -n "$RING_MIN" ]; then
        SERIES_LIMIT=$((RING_LIFETIME + 60))
        MAX_TICKS=$((RING_LIFETIME / INTERVAL + 2))
        _c1='' _c=''
    elif [ "$DURATION" = 0 ]; then
        SERIES_LIMIT=86460
        MAX_TICKS=$((86400 / INTERVAL + 2))
        _c1='' _c='' # no counts: the collectors run until stopped
    else
        SERIES_LIMIT=$((DURATION + 60))
        MAX_TICKS=$((_n + 3))
        _c1=$((_n + 1)) _c=$_n
    fi
    say "starting time series every $INTERVAL s"

    if have_cmd vmstat; then
        if vmstat -t -w 1 1 >/dev/null 2>&1; then
            series vmstat vmstat counted vmstat -t -w -n "$INTERVAL" ${_c1:+"$_c1"}
        else
            series vmstat vmstat counted vmstat -t -n "$INTERVAL" ${_c1:+"$_c1"}
        fi
    else
        reg_off vmstat series vmstat missing "command not found: vmstat (procps)" "vmstat -t -w -n $INTERVAL"
    fi
    if have_cmd iostat; then
        series iostat iostat counted iostat -t -x -y "$INTERVAL" ${_c:+"$_c"}
    else
        reg_off iostat series iostat missing "command not found: iostat (install sysstat)" "iostat -t -x -y $INTERVAL"
    fi
    # the JSON form repeats the text's numbers at twice the bytes: only when asked for
    if [ "$IOSTAT_JSON" != true ]; then
        reg_off iostat_json series iostat_json skipped "off by default (--iostat-json)" "iostat -t -x -y -o JSON $INTERVAL"
    elif ! have_cmd iostat; then
        reg_off iostat_json series iostat_json missing "command not found: iostat (install sysstat)" "iostat -t -x -y -o JSON $INTERVAL"
    else
        case $RING_MIN$(iostat -o JSON 2>/dev/null | head -c 1) in
        [0-9]*) reg_off iostat_json series iostat_json skipped "flight recorder: a JSON stream cannot be cut into slots (iostat has the same data)" "iostat -t -x -y -o JSON $INTERVAL" ;;
        '{') series iostat_json iostat_json counted iostat -t -x -y -o JSON "$INTERVAL" ${_c:+"$_c"} ;;
        *) reg_off iostat_json series iostat_json skipped "this iostat has no -o JSON (sysstat < 11.5)" "iostat -t -x -y -o JSON $INTERVAL" ;;
        esac
    fi
    if have_cmd mpstat; then
        series mpstat mpstat counted mpstat -P ALL "$INTERVAL" ${_c:+"$_c"}
        # per-CPU interrupt tables: CPUs x 11 numbers per report, so every IRQ_IV s only
        _ci=''
        [ -n "$_c" ] && _ci=$((_n * INTERVAL / IRQ_IV))
        if mpstat -I SUM,SCPU -P ALL >/dev/null 2>&1; then
            series mpstat_irq mpstat_irq counted mpstat -I SUM,SCPU -P ALL "$IRQ_IV" ${_ci:+"$_ci"}
        else
            series mpstat_irq mpstat_irq counted mpstat -I SUM "$IRQ_IV" ${_ci:+"$_ci"}
        fi
    else
        reg_off mpstat series mpstat missing "command not found: mpstat (install sysstat)" "mpstat -P ALL $INTERVAL"
        reg_off mpstat_irq series mpstat_irq missing "command not found: mpstat (install sysstat)" "mpstat -I SUM,SCPU -P ALL $IRQ_IV"
    fi
    if have_cmd sar; then
        _net=DEV,EDEV
        if sar --help 2>&1 | grep -q 'SOFT'; then _net=DEV,EDEV,SOFT; fi
        series sar sar counted sar -n "$_net" -q -B -w "$INTERVAL" ${_c:+"$_c"}
    else
        reg_off sar series sar missing "command not found: sar (install sysstat)" "sar -n DEV,EDEV -q -B -w $INTERVAL"
    fi
    if have_cmd pidstat; then
        # every task that was active in the interval (no -p): a process that starts,
        # restarts or forks workers after the capture began is seen too; idle tasks print
        # nothing (about 1.5 % of one core with 575 processes, docs/capture.md)
        if pidstat -h -H -p "$$" >/dev/null 2>&1; then
            series pidstat pidstat counted pidstat -u -r -d -w -h -H "$INTERVAL" ${_c:+"$_c"}
        else
            series pidstat pidstat counted pidstat -u -r -d -w -h "$INTERVAL" ${_c:+"$_c"}
        fi
    else
        reg_off pidstat series pidstat missing "command not found: pidstat (install sysstat)" "pidstat -u -r -d -w -h -H $INTERVAL"
    fi
    # the cgroup of every process, for "who" (container, pod, systemd unit); docs/capture.md
    if [ -r /proc/self/cgroup ]; then
        _pcg_iv=$((INTERVAL > 5 ? INTERVAL : 5))
        _pcg_seen=.state/proc_cgroup.seen
        [ -z "$RING_MIN" ] || _pcg_seen=
        _cmd_override="every $_pcg_iv s: awk over /proc/[0-9]*/cgroup (changes only)"
        series proc_cgroup proc_cgroup empty_ok sh -c "$PROC_CGROUP_SH" hindsight-proc-cgroup "$_pcg_iv" "$DATE_FMT" "$$" .state/stop \
            "$((MAX_TICKS * INTERVAL / _pcg_iv + 2))" "$_pcg_seen" "$PROC_CGROUP_AWK"
    else
        reg_off proc_cgroup series proc_cgroup missing "no /proc/self/cgroup (no cgroups)" ""
    fi

    # samplers
    : >.state/psi.list
    add_files .state/psi.list /proc/pressure/cpu /proc/pressure/memory /proc/pressure/io /proc/pressure/irq
    if [ -s .state/psi.list ] && ! read -r _x </proc/pressure/cpu 2>/dev/null; then
        : >.state/psi.list
        say "note: /proc/pressure is not readable (kernel booted with psi=0?)"
    fi
    cat .state/cgpsi.list >>.state/psi.list
    if [ -s .state/psi.list ]; then
        sampler psi .state/psi.list
    else
        reg_off psi series psi missing "no /proc/pressure (kernel < 4.20, or psi=0 on the kernel command line)" ""
    fi
    if [ -s .state/cgroup.list ]; then
        sampler cgroup .state/cgroup.list
    else
        reg_off cgroup series cgroup skipped "no target cgroup found (give --cgroup or --pid)" ""
    fi
    : >.state/meminfo.list
    add_files .state/meminfo.list /proc/meminfo
    sampler meminfo .state/meminfo.list
    : >.state/proc_vmstat.list
    add_files .state/proc_vmstat.list /proc/vmstat
    sampler proc_vmstat .state/proc_vmstat.list
    : >.state/ib.list
    if [ -d /sys/class/infiniband ]; then
        add_files .state/ib.list /sys/class/infiniband/*/ports/*/state /sys/class/infiniband/*/ports/*/rate \
            /sys/class/infiniband/*/ports/*/counters/* /sys/class/infiniband/*/ports/*/hw_counters/*
    fi
    if [ -s .state/ib.list ]; then
        sampler infiniband .state/ib.list
    else
        reg_off infiniband series infiniband missing "no /sys/class/infiniband port counters (no RDMA devices)" ""
    fi

    start_samplers

    # kernel log, new messages only (the ring buffer so far is snap/dmesg_full)
    # (read can fail on sysctl files for non-root although it got the value)
    _restrict=''
    read -r _restrict </proc/sys/kernel/dmesg_restrict 2>/dev/null
    [ -n "$_restrict" ] || _restrict=0
    if ! have_cmd dmesg; then
        reg_off dmesg series dmesg missing "command not found: dmesg" "dmesg -W --time-format iso"
    elif [ "$IS_ROOT" != true ] && [ "$_restrict" = 1 ]; then
        reg_off dmesg series dmesg skipped "kernel.dmesg_restrict=1 and not root" "dmesg -W --time-format iso"
    else
        _h=$(dmesg --help 2>&1)
        set -- dmesg
        case $_h in *--follow-new*) set -- "$@" -W ;; *--follow*) set -- "$@" -w ;; esac
        case $_h in *--time-format*) set -- "$@" --time-format iso ;; esac
        DMESG_ISO=
        case $_h in *--time-format*) DMESG_ISO=1 ;; esac
        if [ "$#" = 1 ] || [ "$2" = --time-format ]; then
            reg_off dmesg series dmesg missing "this dmesg cannot follow (busybox?)" "dmesg -w"
        else
            cmdline "$@"
            _cmd_override=$CMDLINE
            if [ -n "$USE_STDBUF" ]; then set -- stdbuf -oL "$@"; fi
            series dmesg dmesg empty_ok "$@"
        fi
    fi

    # bpftrace histograms
    if [ "$NO_BPF" = true ]; then
        reg_off bpf_runqlat series bpftrace skipped "--no-bpf" "bpftrace runqlat.bt"
        reg_off bpf_biolat series bpftrace skipped "--no-bpf" "bpftrace biolat.bt"
    elif [ "$SAFE_MODE" = true ]; then
        reg_off bpf_runqlat series bpftrace skipped "--safe-mode" "bpftrace runqlat.bt"
        reg_off bpf_biolat series bpftrace skipped "--safe-mode" "bpftrace biolat.bt"
    elif ! have_cmd bpftrace; then
        reg_off bpf_runqlat series bpftrace missing "command not found: bpftrace" "bpftrace runqlat.bt"
        reg_off bpf_biolat series bpftrace missing "command not found: bpftrace" "bpftrace biolat.bt"
    elif [ "$IS_ROOT" != true ]; then
        reg_off bpf_runqlat series bpftrace skipped "needs root" "bpftrace runqlat.bt"
        reg_off bpf_biolat series bpftrace skipped "needs root" "bpftrace biolat.bt"
    else
        _cmd_override="bpftrace -B line -e <capture/bpftrace/runqlat.bt>"
        series bpf_runqlat bpftrace empty_ok bpftrace -B line -e "$RUNQLAT_BT"
        _cmd_override="bpftrace -B line -e <capture/bpftrace/biolat.bt>"
        series bpf_biolat bpftrace empty_ok bpftrace -B line -e "$BIOLAT_BT"
    fi
    # sampled on-CPU stacks ("where in the code"; bounded: see stacks.bt, docs/capture.md)
    if [ "$NO_BPF" = true ] || [ "$SAFE_MODE" = true ] || [ "$NO_STACKS" = true ]; then
        _why=--no-bpf
        [ "$NO_BPF" = true ] || _why=--safe-mode
        [ "$NO_BPF" = true ] || [ "$SAFE_MODE" = true ] || _why=--no-stacks
        reg_off bpf_stacks series stacks skipped "$_why" "bpftrace stacks.bt"
    elif ! have_cmd bpftrace; then
        reg_off bpf_stacks series stacks missing "command not found: bpftrace" "bpftrace stacks.bt"
    elif [ "$IS_ROOT" != true ]; then
        reg_off bpf_stacks series stacks skipped "needs root" "bpftrace stacks.bt"
    else
        _cmd_override="bpftrace -B line -e <capture/bpftrace/stacks.bt>"
        series bpf_stacks stacks empty_ok bpftrace -B line -e "$STACKS_BT"
    fi
    # the same stacks with perf where bpftrace is missing (about twice its cost: --no-bpf,
    # the light capture, turns it off too); docs/capture.md
    _pcmd="perf record -e cpu-clock -F 49 -g -a --switch-output=10s; perf script -F comm,pid,ip,sym,dso | fold, top 200 (each 10 s file)"
    if [ "$SAFE_MODE" = true ] || [ "$NO_STACKS" = true ] || [ "$NO_BPF" = true ]; then
        _why=--safe-mode
        [ "$SAFE_MODE" = true ] || _why=--no-stacks
        [ "$SAFE_MODE" = true ] || [ "$NO_STACKS" = true ] || _why=--no-bpf
        reg_off perf_stacks series stacks skipped "$_why" "$_pcmd"
    elif have_cmd bpftrace && [ "$IS_ROOT" = true ]; then
        reg_off perf_stacks series stacks skipped "bpftrace samples the stacks (bpf_stacks)" "$_pcmd"
    elif ! have_cmd perf; then
        reg_off perf_stacks series stacks missing "command not found: perf (linux-perf, linux-tools)" "$_pcmd"
    elif [ "$IS_ROOT" != true ]; then
        reg_off perf_stacks series stacks skipped "needs root" "$_pcmd"
    else
        _cmd_override=$_pcmd
        series perf_stacks stacks empty_ok sh -c "$PERF_STACKS_SH" hindsight-perf-stacks "$$" .state/stop \
            .state/perf_stacks.data 10 200 "$PERF_FOLD_AWK"
    fi
}

# GPU: probe (which can hang on a sick GPU), then dmon with the widest metric set
start_gpu() {
    GPU_OK=
    if [ "$NO_GPU" = true ] || [ "$SAFE_MODE" = true ]; then
        _why=--no-gpu
        [ "$SAFE_MODE" = true ] && _why="--safe-mode"
        reg_off nvidia_dmon series nvidia_dmon skipped "$_why" "nvidia-smi dmon"
        return 0
    fi
    if ! have_cmd nvidia-smi; then
        reg_off nvidia_dmon series nvidia_dmon missing "command not found: nvidia-smi (no NVIDIA driver)" "nvidia-smi dmon"
        return 0
    fi
    PHASE=start
    if ! snap nvidia_list nvidia_smi 20 nvidia-smi -L; then
        reg_off nvidia_dmon series nvidia_dmon failed "nvidia-smi -L did not succeed (see snap/nvidia_list.start.err)" "nvidia-smi dmon"
        return 0
    fi
    GPU_OK=1
    _lim=20
    [ -n "$CMD_TIMEOUT" ] && _lim=$CMD_TIMEOUT
    _sel=
    # _gpu_set, not _s: POSIX sh has no locals and probe's helpers use _s.
    for _gpu_set in pucvmet pucvm puc; do
        if probe "$_lim" nvidia-smi dmon -c 1 -s "$_gpu_set" -o DT; then
            _sel=$_gpu_set
            break
        fi
        if [ -n "$GPU_HUNG" ]; then
            reg_off nvidia_dmon series nvidia_dmon timeout "nvidia-smi dmon did not answer within $_lim s" "nvidia-smi dmon"
            return 0
        fi
    done
    set -- nvidia-smi dmon -o DT -d "$INTERVAL"
    [ -n "$_sel" ] && set -- "$@" -s "$_sel"
    cmdline "$@"
    _cmd_override=$CMDLINE
    if [ -n "$USE_STDBUF" ]; then set -- stdbuf -oL "$@"; fi
    series nvidia_dmon nvidia_dmon "" "$@"
}

# ---------------------------------------------------------------- application series
# --app-metrics and --app-log collectors (docs/capture.md "Application"). Together they
# may use a quarter of --max-mb (none of it in the flight recorder: its slots are capped)
start_app() {
    _ap_napp=$(printf '%s%s' "$APP_URLS" "$APP_LOGS" | wc -l)
    APP_BUDGET=0
    [ -n "$RING_MIN" ] || [ "$_ap_napp" -eq 0 ] || APP_BUDGET=$((MAX_MB * 1048576 / 4 / _ap_napp))
    start_app_metrics
    start_app_logs
}

start_app_metrics() {
    if [ -z "$APP_URLS" ]; then
        reg_off app_metrics series app_metrics skipped "no --app-metrics URL given" "curl URL (every interval)"
        return 0
    fi
    _ap_tool=
    if have_cmd curl; then
        _ap_tool=curl
    elif have_cmd wget && [ -n "$HAVE_TIMEOUT" ]; then
        _ap_tool=wget
    fi
    _ap_wgnu=
    if [ "$_ap_tool" = wget ] && wget --version 2>/dev/null | grep -q 'GNU Wget'; then _ap_wgnu=1; fi
    # one scrape takes at most 0.8 x the interval (10 s at most); timeout(1) is a backstop
    _ap_lim=$(awk -v i="$INTERVAL" 'BEGIN { b = i * 0.8; if (b > 10) b = 10; printf "%.1f", b }')
    _ap_conn=$(awk -v b="$_ap_lim" 'BEGIN { c = b / 2; if (c > 3) c = 3; printf "%.1f", c }')
    _ap_tlim=$(awk -v b="$_ap_lim" 'BEGIN { printf "%.1f", b + 0.1 }')
    if [ -n "$HAVE_TIMEOUT" ] && ! timeout 0.5 true 2>/dev/null; then
        _ap_tlim=$(awk -v b="$_ap_lim" 'BEGIN { printf "%d", b + 1 }')
    fi
    _ap_kb=${HINDSIGHT_APP_MAX_KB:-1024}
    if ! is_uint "$_ap_kb" || [ "$_ap_kb" -lt 1 ]; then _ap_kb=1024; fi
    _ap_i=0
    while IFS= read -r _ap_u; do
        [ -n "$_ap_u" ] || continue
        _ap_i=$((_ap_i + 1))
        _ap_name=app_metrics_$_ap_i
        # user:password@ in the URL is masked wherever it is written
        _ap_shown=$(printf '%s\n' "$_ap_u" | awk "$MASK_AWK")
        if [ -z "$_ap_tool" ]; then
            reg_off "$_ap_name" series app_metrics missing "command not found: curl (or wget with timeout)" "curl $_ap_shown"
            continue
        fi
        set --
        if [ -n "$HAVE_TIMEOUT" ]; then
            if [ -n "$TIMEOUT_K" ]; then set -- timeout -k 1 "$_ap_tlim"; else set -- timeout "$_ap_tlim"; fi
        fi
        _cmd_override="$_ap_tool $_ap_shown every $INTERVAL s, at most $_ap_lim s and $_ap_kb KiB a page (see bundle-format.md)"
        series "$_ap_name" app_metrics "" sh -c "$SCRAPE_SH" hindsight-scrape "$_ap_u" "$_ap_shown" "$INTERVAL" "$DATE_FMT" \
            "$$" .state/stop "$MAX_TICKS" "$_ap_tool" "$_ap_lim" "$_ap_conn" "$((_ap_kb * 1024))" "$APP_BUDGET" \
            ".state/$_ap_name" ".state/$_ap_name.note" "$_ap_wgnu" "$SCRAPE_AWK" "$@"
    done <<EOF
$APP_URLS
EOF
    say "scraping $_ap_i application endpoint(s) every $INTERVAL s with $_ap_tool (at most $_ap_lim s and $_ap_kb KiB a page)"
}

start_app_logs() {
    if [ -z "$APP_LOGS" ]; then
        reg_off app_log series app_log skipped "no --app-log FILE given" "tail -n 0 -F FILE | awk ERE"
        return 0
    fi
    _ap_th=$(tail --help 2>&1)
    _ap_i=0
    while IFS= read -r _ap_f; do
        [ -n "$_ap_f" ] || continue
        _ap_i=$((_ap_i + 1))
        _ap_name=app_log_$_ap_i
        _ap_pat=$(printf '%s' "$APP_PATTERNS" | sed -n "${_ap_i}p")
        set -- tail -n 0 -f
        case $_ap_th in *-F*) set -- tail -n 0 -F ;; esac
        case $_ap_th in *--pid*) set -- "$@" "--pid=$$" ;; esac
        cmdline "$@" "$_ap_f"
        _ap_cmd="$CMDLINE | awk: the lines matching the ERE $_ap_pat, stamped (see bundle-format.md)"
        if ! _ap_e=$(HS_PAT=$_ap_pat awk 'BEGIN { if ("" ~ ENVIRON["HS_PAT"]) n = 1 }' 2>&1 </dev/null); then
            clean "$_ap_e"
            reg_off "$_ap_name" series app_log failed "awk rejects the --app-pattern: ${CLEAN:-$_ap_pat}" "$_ap_cmd"
            continue
        fi
        if [ -e "$_ap_f" ] && [ ! -r "$_ap_f" ]; then
            reg_off "$_ap_name" series app_log failed "cannot read $_ap_f (permission denied)" "$_ap_cmd"
            continue
        fi
        [ -e "$_ap_f" ] || say "note: --app-log $_ap_f does not exist yet: following it once it appears"
        _cmd_override=$_ap_cmd
        series "$_ap_name" app_log "" sh -c "$APPLOG_SH" hindsight-applog "$_ap_f" ".state/$_ap_name.log.fifo" "$APPLOG_AWK" \
            "$_ap_pat" 50 "$APP_BUDGET" "$AWK_INTERACTIVE" "$DATE_FMT" ".state/$_ap_name.note" "$@"
    done <<EOF
$APP_LOGS
EOF
}

# ---------------------------------------------------------------- snapshots
take_snapshots() {
    PHASE=$1
    say "taking $PHASE snapshots"
    if [ "$PHASE" = start ]; then
        snap_cmd uname uname 10 uname -a
        if [ -r /etc/os-release ]; then
            snap_cmd os_release os_release 10 cat /etc/os-release
        else
            snap_cmd os_release os_release 10 cat /usr/lib/os-release
        fi
        snap_cmd cmdline cmdline 10 cat /proc/cmdline
        snap_cmd lscpu lscpu 15 lscpu
        snap_cmd numactl numactl 15 numactl -H
        snap_cmd lsblk lsblk 15 lsblk
        snap_files sysctl host_config "$SYSCTL_AWK" /proc/sys/vm/* /proc/sys/kernel/sched* \
            /proc/sys/kernel/numa_balancing* /proc/sys/kernel/hung_task* /proc/sys/kernel/watchdog_thresh \
            /proc/sys/kernel/nmi_watchdog /proc/sys/kernel/panic* /proc/sys/kernel/pid_max \
            /proc/sys/kernel/threads-max /proc/sys/kernel/dmesg_restrict /proc/sys/fs/file-max /proc/sys/fs/file-nr
        snap_files thp host_config "$DUMP_AWK" /sys/kernel/mm/transparent_hugepage/enabled \
            /sys/kernel/mm/transparent_hugepage/defrag /sys/kernel/mm/transparent_hugepage/shmem_enabled \
            /sys/kernel/mm/transparent_hugepage/use_zero_page /sys/kernel/mm/transparent_hugepage/khugepaged/defrag \
            /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none \
            /sys/kernel/mm/transparent_hugepage/khugepaged/pages_to_scan \
            /sys/kernel/mm/transparent_hugepage/khugepaged/scan_sleep_millisecs
        snap_files cpufreq host_config "$DUMP_AWK" /sys/devices/system/cpu/online /sys/devices/system/cpu/offline \
            /sys/devices/system/cpu/isolated /sys/devices/system/cpu/nohz_full \
            /sys/devices/system/cpu/intel_pstate/status /sys/devices/system/cpu/intel_pstate/no_turbo \
            /sys/devices/system/cpu/cpufreq/boost \
            /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor \
            /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_driver \
            /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq \
            /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_min_freq \
            /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_max_freq \
            /sys/devices/system/cpu/cpu[0-9]*/cpufreq/energy_performance_preference
        snap_files irq_affinity host_config "$DUMP_AWK" /proc/irq/default_smp_affinity \
            /proc/irq/*/smp_affinity_list /proc/irq/*/effective_affinity_list
        snap_cmd mounts mounts 10 cat /proc/self/mounts
        if ! have_cmd dmesg; then
            reg_off dmesg_full.start snapshot dmesg missing "command not found: dmesg" "dmesg"
        elif [ "$IS_ROOT" != true ] && [ "$_restrict" = 1 ]; then
            reg_off dmesg_full.start snapshot dmesg skipped "kernel.dmesg_restrict=1 and not root" "dmesg"
        elif [ -n "$DMESG_ISO" ]; then
            snap dmesg_full dmesg 20 dmesg --time-format iso
        else
            snap dmesg_full dmesg 20 dmesg
        fi
        if ! snap_cmd journal_prev journalctl 30 journalctl -k -b -1 --no-pager -o short-iso-precise -n 50000 &&
            [ -s snap/journal_prev.start.err ] && grep -q -i -e 'boot' -e 'no journal' snap/journal_prev.start.err; then
            reg journal_prev.start snapshot journalctl snap/journal_prev.start.out snap/journal_prev.start.err \
                snap/journal_prev.start.status skipped "" "no previous boot in the journal: $(tail -n 1 snap/journal_prev.start.err)" "" \
                "journalctl -k -b -1 --no-pager -o short-iso-precise -n 50000"
        fi
        pstore_snapshot
    fi
    snap_cmd df df 15 df -Pk
    snap_cmd mountstats mountstats 15 cat /proc/self/mountstats
    snap_cmd interrupts interrupts 10 cat /proc/interrupts
    snap_cmd softirqs softirqs 10 cat /proc/softirqs
    snap_cmd buddyinfo buddyinfo 10 cat /proc/buddyinfo
    if have_cmd ps; then
        if [ -n "$PS_PROCPS" ]; then
            SNAP_CMD="ps -eo pid,ppid,user,pri,ni,psr,stat,pcpu,pmem,rss,vsz,nlwp,etimes,comm,args --sort=-pcpu | head -n 101 | mask"
            snap ps_cpu ps 15 sh -c 'ps -eo pid,ppid,user,pri,ni,psr,stat,pcpu,pmem,rss,vsz,nlwp,etimes,comm,args --sort=-pcpu | head -n 101 | awk "$1"' sh "$MASK_AWK"
            SNAP_CMD="ps -eo pid,ppid,user,pri,ni,psr,stat,pcpu,pmem,rss,vsz,nlwp,etimes,comm,args --sort=-rss | head -n 101 | mask"
            snap ps_rss ps 15 sh -c 'ps -eo pid,ppid,user,pri,ni,psr,stat,pcpu,pmem,rss,vsz,nlwp,etimes,comm,args --sort=-rss | head -n 101 | awk "$1"' sh "$MASK_AWK"
        else
            snap ps_cpu ps 15 sh -c 'ps -o pid,ppid,user,vsz,rss,stat,comm,args | awk "$1"' sh "$MASK_AWK"
            reg_off "ps_rss.$PHASE" snapshot ps skipped "this ps cannot sort (busybox); see ps_cpu" "ps"
        fi
    else
        reg_off "ps_cpu.$PHASE" snapshot ps missing "command not found: ps" "ps"
        reg_off "ps_rss.$PHASE" snapshot ps missing "command not found: ps" "ps"
    fi
    _snap_pids=$PIDS
    if [ "$PIDS_AUTO" = true ]; then
        # shellcheck disable=SC2086 # PIDS is a list of numbers
        _snap_pids=$(printf '%s\n' $PIDS | head -n 5 | tr '\n' ' ')
    fi
    if [ -n "$PIDS" ]; then
        SNAP_CMD="for each PID: /proc/PID/{cmdline,status,cgroup,oom_score_adj,oom_score,io,environ}, chrt -p, taskset -pc | mask"
        # shellcheck disable=SC2086 # PIDS is a list of numbers
        snap pids pids 20 sh -c "$PIDS_SH" sh "$MASK_AWK" $_snap_pids
    else
        reg_off "pids.$PHASE" snapshot pids skipped "no target PIDs" ""
    fi
    # the Python stacks of the target PIDs that run Python (py-spy pauses each a moment)
    _py=
    for _p in $_snap_pids; do
        _pc=
        read -r _pc 2>/dev/null <"/proc/$_p/comm" || continue
        _pa=$(tr '\000' '\n' 2>/dev/null <"/proc/$_p/cmdline" | head -n 1)
        case "$_pc ${_pa##*/}" in python* | *" python"*) _py="$_py $_p" ;; esac
    done
    if [ "$SAFE_MODE" = true ]; then
        reg_off "py_spy.$PHASE" snapshot py_spy skipped "--safe-mode" "py-spy dump --pid PID"
    elif [ -z "$PIDS" ]; then
        reg_off "py_spy.$PHASE" snapshot py_spy skipped "no target PIDs" "py-spy dump --pid PID"
    elif [ -z "$_py" ]; then
        reg_off "py_spy.$PHASE" snapshot py_spy skipped "no target PID runs Python" "py-spy dump --pid PID"
    elif ! have_cmd py-spy; then
        reg_off "py_spy.$PHASE" snapshot py_spy missing "command not found: py-spy (pip install py-spy)" "py-spy dump --pid PID"
    else
        SNAP_CMD="for each Python target PID: py-spy dump --pid PID"
        # shellcheck disable=SC2086 # a list of numbers
        snap py_spy py_spy 30 sh -c "$PYSPY_SH" sh $_py
    fi
    # container and pod names from the runtime's own metadata (the analyzer parses IDs,
    # pods and units from cgroup paths either way; docs/capture.md "containers")
    if [ "$SAFE_MODE" = true ]; then
        reg_off "containers.$PHASE" snapshot containers skipped "--safe-mode" "crictl ps -a -o json; docker ps"
    elif ! have_cmd crictl && ! have_cmd docker; then
        reg_off "containers.$PHASE" snapshot containers missing "no crictl or docker: container IDs and pods from cgroup paths only" "crictl ps -a -o json; docker ps"
    else
        have_cmd crictl && snap containers_crictl containers 15 crictl ps -a -o json
        have_cmd docker && snap containers_docker containers 15 docker ps -a --no-trunc --format "$DOCKER_PS_FMT"
    fi
    if [ -s .state/cglimits.list ]; then
        SNAP_CMD="read the limit files of the target cgroups (.state/cglimits.list)"
        snap cgroup_limits host_config 15 awk -v list=.state/cglimits.list "$DUMP_AWK"
    else
        reg_off "cgroup_limits.$PHASE" snapshot host_config skipped "no target cgroup found (give --cgroup or --pid)" ""
    fi
    if [ -n "$GPU_OK" ]; then
        snap nvidia_smi_q nvidia_smi 60 nvidia-smi -q
        [ "$PHASE" = start ] && snap nvidia_topo nvidia_smi 20 nvidia-smi topo -m
        snap nvidia_apps nvidia_smi 20 nvidia-smi --query-compute-apps=gpu_bus_id,gpu_uuid,pid,process_name,used_memory --format=csv
        snap nvidia_ecc nvidia_smi 20 nvidia-smi --query-gpu=index,pci.bus_id,uuid,ecc.mode.current,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.aggregate.total,ecc.errors.uncorrected.aggregate.total,retired_pages.pending,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv ||
            snap nvidia_ecc nvidia_smi 20 nvidia-smi -q -d ECC,PAGE_RETIREMENT
    fi
    return 0
}

# docker ps: one tab-separated line per container (full ID, name, image, state, and the
# pod labels the kubelet's dockershim / cri-dockerd set)
# shellcheck disable=SC2016 # a Go template for docker, not for the shell
DOCKER_PS_FMT='{{.ID}}\t{{.Names}}\t{{.Image}}\t{{.State}}\t{{.Label "io.kubernetes.pod.name"}}\t{{.Label "io.kubernetes.pod.namespace"}}\t{{.Label "io.kubernetes.pod.uid"}}'

# per Python target PID: a "hindsight py-spy: pid N" line, then its py-spy dump; exit 0
# when at least one dump worked
PYSPY_SH='rc=1
for p in "$@"; do
    echo "hindsight py-spy: pid $p"
    py-spy dump --pid "$p" && rc=0
done
exit "$rc"'

# per target PID: "<pid> <source> <line>", then masked
PIDS_SH='mask=$1
shift
pfx() { while IFS= read -r l || [ -n "$l" ]; do printf "%s %s %s\n" "$p" "$1" "$l"; done; }
for p in "$@"; do
    if [ ! -d "/proc/$p" ]; then echo "$p gone"; continue; fi
    { tr "\000" " " </proc/$p/cmdline; echo; } 2>&1 | pfx cmdline
    pfx status </proc/$p/status 2>&1
    chrt -p "$p" 2>&1 | pfx chrt
    taskset -pc "$p" 2>&1 | pfx taskset
    pfx cgroup </proc/$p/cgroup 2>&1
    pfx oom_score_adj </proc/$p/oom_score_adj 2>&1
    pfx oom_score </proc/$p/oom_score 2>&1
    pfx io </proc/$p/io 2>&1
    tr "\000" "\n" </proc/$p/environ 2>&1 | pfx environ
done | awk "$mask"'

pstore_snapshot() {
    if [ ! -d /sys/fs/pstore ]; then
        reg_off pstore.start snapshot pstore missing "no /sys/fs/pstore" ""
        return 0
    fi
    if [ ! -r /sys/fs/pstore ] || [ ! -x /sys/fs/pstore ]; then
        reg_off pstore.start snapshot pstore skipped "/sys/fs/pstore is not readable (needs root)" ""
        return 0
    fi
    set -- /sys/fs/pstore/*
    if [ ! -e "$1" ]; then
        reg_off pstore.start snapshot pstore skipped "/sys/fs/pstore is empty (no crash record kept)" ""
        return 0
    fi
    if [ -n "$DISK_STOPPED" ]; then
        reg_off pstore.start snapshot pstore skipped "the output filesystem is full ($STOP_REASON)" ""
        return 0
    fi
    mkdir -p snap/pstore
    _stem=snap/pstore.start
    spawn 30 "$_stem.out" "$_stem.err" "$_stem.status" cp -R "$@" snap/pstore/
    ONESHOT_PID=$SPAWN_PID
    if await_status "$_stem.status" 35; then
        read -r _l <"$_stem.status" || _l=rc=1
        wait "$ONESHOT_PID" 2>/dev/null
        _rc=${_l#rc=}
        [ "$_rc" = 0 ] && _st=ok || _st=failed
    else
        _rc='' _st=timeout
    fi
    ONESHOT_PID=
    reg pstore.start snapshot pstore "snap/pstore/" "$_stem.err" "$_stem.status" "$_st" "$_rc" "" "" "cp -R /sys/fs/pstore/* snap/pstore/"
}

# ---------------------------------------------------------------- sysstat history
# sadf -j output, records before `until` ("YYYY-MM-DD HH:MM:SS" UTC) only: the records
# from the capture window on are left out (the capture's own sar covers them). Output is
# delayed by two lines so that the comma after the last kept record can be removed.
HISTORY_AWK='
function ind(s) { match(s, /^[ \t]*/); return RLENGTH }
function emit(l) { if (n2) print h2; h2 = h1; n2 = n1; h1 = l; n1 = 1 }
{
    if (!skip && $0 ~ /"timestamp": *[{]/) {
        d = $0; sub(/.*"date": *"/, "", d); t = $0; sub(/.*"time": *"/, "", t)
        if (substr(d, 1, 10) " " substr(t, 1, 8) >= until) {
            skip = 1; depth = ind($0); dropped++
            n1 = 0
            if (n2) sub(/,[ \t]*$/, "", h2)
            next
        }
    }
    if (skip) {
        if ($0 ~ /^[ \t]*\][ \t]*,?[ \t]*$/ && ind($0) < depth - 1) skip = 0
        else { if ($0 ~ /"timestamp": *[{]/) dropped++; next }
    }
    emit($0)
}
END {
    if (n2) print h2
    if (n1) print h1
    if (dropped) printf "hindsight: %d records from %s UTC on left out (inside the capture window)\n", dropped, until > "/dev/stderr"
}
'
HISTORY_SH='f=$1 until=$2 prog=$3 tmp=$4
sadf -j "$f" -- -u -P ALL -r -B -q -w -W -S -d -n DEV,EDEV >"$tmp" 2>/dev/null ||
    sadf -j "$f" -- -A >"$tmp" || { rc=$?; rm -f "$tmp"; exit "$rc"; }
awk -v until="$until" "$prog" "$tmp"
rc=$?
rm -f "$tmp"
exit "$rc"'

# import_history UNTIL_ISO: convert the daily sa files modified in the last
# HISTORY_HOURS hours into history/<file>.out (data before UNTIL only)
import_history() {
    _until=$1
    meta history_hours n "$HISTORY_HOURS"
    meta history_until s "$_until"
    meta_list history_files
    if [ "$HISTORY_HOURS" = 0 ]; then
        reg_off history history sadf skipped "--history-hours 0" ""
        return 0
    fi
    if ! have_cmd sadf; then
        reg_off history history sadf missing "command not found: sadf (sysstat)" ""
        return 0
    fi
    if [ -n "$DISK_STOPPED" ]; then
        reg_off history history sadf skipped "the output filesystem is full ($STOP_REASON)" ""
        return 0
    fi
    : >.state/history.list
    _seen=
    for _d in $SA_DIRS; do
        [ -d "$_d" ] || continue
        _real=$(cd "$_d" 2>/dev/null && pwd -P) || continue
        case " $_seen " in *" $_real "*) continue ;; esac
        _seen="$_seen $_real"
        # -mmin is GNU and busybox; POSIX -mtime (whole days) otherwise
        find "$_real/." ! -name . -prune -type f \( -name 'sa[0-9][0-9]' -o -name 'sa[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]' \) \
            -mmin "-$((HISTORY_HOURS * 60))" >>.state/history.list 2>/dev/null ||
            find "$_real/." ! -name . -prune -type f \( -name 'sa[0-9][0-9]' -o -name 'sa[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]' \) \
                -mtime "-$(((HISTORY_HOURS + 23) / 24))" >>.state/history.list 2>/dev/null
    done
    if [ ! -s .state/history.list ]; then
        reg_off history history sadf skipped "no sysstat daily file (sa*) written in the last $HISTORY_HOURS h in $SA_DIRS" ""
        return 0
    fi
    mkdir -p history
    set --
    _u=$(printf '%s' "$_until" | tr 'TZ' '  ')
    _u=${_u% }
    while IFS= read -r _f; do
        _b=${_f##*/}
        _stem=history/$_b
        [ -e "$_stem.out" ] && continue
        say "converting sysstat history $_f (sadf -j, records before $_until)"
        SNAP_CMD="sadf -j $_f -- -u -P ALL -r -B -q -w -W -S -d -n DEV,EDEV (else -A) | records before $_until"
        spawn 120 "$_stem.out" "$_stem.err" "$_stem.status" sh -c "$HISTORY_SH" sh "$_f" "$_u" "$HISTORY_AWK" ".state/$_b.json"
        ONESHOT_PID=$SPAWN_PID
        _reason=
        if await_status "$_stem.status" 125; then
            read -r _l <"$_stem.status" || _l=rc=1
            _rc=${_l#rc=}
            wait "$ONESHOT_PID" 2>/dev/null
            case $_rc in 0) _state=ok ;; 124 | 137) _state=timeout _reason="no answer within 120 s" ;; *) _state=failed ;; esac
        else
            _rc='' _state=timeout _reason="did not exit after kill; abandoned"
        fi
        ONESHOT_PID=
        reg "history.$_b" history sadf "$_stem.out" "$_stem.err" "$_stem.status" "$_state" "$_rc" "$_reason" empty_ok "$SNAP_CMD"
        SNAP_CMD=
        [ "$_state" = ok ] && set -- "$@" "$_stem.out"
    done <.state/history.list
    meta_list history_files "$@"
}

# ---------------------------------------------------------------- limits
# the mpstat -I interval: --irq-interval, else the smallest multiple of the interval
# that is >= 10 s; never longer than the capture (so that it prints at least once)
irq_interval() {
    IRQ_IV=${IRQ_INTERVAL:-$(((10 + INTERVAL - 1) / INTERVAL * INTERVAL))}
    if [ -z "$RING_MIN" ] && [ "$DURATION" -gt 0 ]; then
        _in=$((DURATION / INTERVAL))
        [ "$_in" -ge 1 ] || _in=1
        [ "$IRQ_IV" -le $((_in * INTERVAL)) ] || IRQ_IV=$((_in * INTERVAL))
    fi
}

check_limits() {
    _used=$(du -sk . 2>/dev/null) || _used=0
    _used=${_used%%[!0-9]*}
    [ -n "$_used" ] || _used=0
    if [ "$_used" -ge $((MAX_MB * 1024)) ]; then
        STOP_REASON=max_mb
        say "the bundle reached --max-mb $MAX_MB MiB (${_used} KiB): stopping collectors early"
        return 1
    fi
    free_kb || return 0
    if [ "$FREE_KB" -lt $((MIN_FREE_MB * 1024)) ]; then
        disk_stop disk_floor "the output filesystem has only $((FREE_KB / 1024)) MiB free (floor --min-free-mb $MIN_FREE_MB): stopping collectors early"
        return 1
    fi
    if [ "$FREE_KB" -lt "$DISK_MIN_KB" ]; then
        disk_stop disk_full "the output filesystem is full ($FREE_KB KiB free): stopping collectors early"
        return 1
    fi
    return 0
}

# A full output filesystem must not cost the bundle its manifest: RESERVE_KB of
# incompressible data (.state/reserve) are written at start and given back when the
# collectors are stopped, so that their exit statuses, the end clock and the final
# manifest still fit.
reserve_space() {
    have_cmd dd || return 0
    _src=/dev/urandom
    [ -r "$_src" ] || _src=/dev/zero
    if ! dd if="$_src" of=.state/reserve bs=1024 count="$RESERVE_KB" 2>/dev/null; then
        rm -f .state/reserve
        return 1
    fi
}
# disk_stop REASON MESSAGE: stop collecting because of the output filesystem (once);
# the reserve is given back first so that the collectors' statuses can be written
disk_stop() {
    [ -z "$DISK_STOPPED" ] || return 0
    DISK_STOPPED=1
    case $STOP_REASON in '' | duration) STOP_REASON=$1 ;; esac
    rm -f .state/reserve
    say "$2"
    stop_series
}
# after a failed write: when the output filesystem is (nearly) full, stop collecting
disk_full_check() {
    [ -z "$DISK_STOPPED" ] || return 0
    if free_kb && [ "$FREE_KB" -ge "$DISK_MIN_KB" ]; then return 1; fi
    disk_stop disk_full "the output filesystem is full (a write failed): stopping collectors early"
}
free_kb() {
    _df=$(run_limited 5 df -Pk . 2>/dev/null) || return 1
    _last=${_df##*"$NL"}
    # shellcheck disable=SC2086 # split the df line into fields
    set -- $_last
    [ $# -ge 4 ] && is_uint "$4" || return 1
    FREE_KB=$4
}

# ---------------------------------------------------------------- stopping
stop_series() {
    [ -n "$SERIES_PIDS" ] || return 0
    # those that already ended (killed, crashed) did not end because of this stop
    for _e in $SERIES_PIDS; do
        _rest=${_e#*:}
        _rest=${_rest%%:*}
        [ -e "series/$_rest.status" ] && : >".state/$_rest.early"
    done
    : >.state/stop
    if [ "$STOP_REASON" = duration ]; then
        # let the counted collectors (sysstat) finish their last report on their own
        _t=0
        while [ "$_t" -lt $((INTERVAL + 3)) ]; do
            _all=1
            for _e in $SERIES_PIDS; do
                _rest=${_e#*:}
                case ${_rest#*:} in *counted*) [ -e "series/${_rest%%:*}.status" ] || _all= ;; esac
            done
            [ -n "$_all" ] && break
            nap 1
            _t=$((_t + 1))
        done
    fi
    STOPPED=1
    for _e in $SERIES_PIDS; do
        _rest=${_e#*:}
        [ -e "series/${_rest%%:*}.status" ] || kill -TERM "${_e%%:*}" 2>/dev/null
    done
    _t=0
    while [ "$_t" -lt 16 ]; do
        _all=1
        for _e in $SERIES_PIDS; do
            _rest=${_e#*:}
            [ -e "series/${_rest%%:*}.status" ] || _all=
        done
        [ -n "$_all" ] && break
        if [ -n "$FRACTIONAL_SLEEP" ]; then nap 0.5; else nap 1 && _t=$((_t + 1)); fi
        _t=$((_t + 1))
    done
    for _e in $SERIES_PIDS; do
        _rest=${_e#*:}
        if [ -e "series/${_rest%%:*}.status" ]; then
            wait "${_e%%:*}" 2>/dev/null
        else
            say "warning: collector ${_rest%%:*} did not stop; leaving it"
        fi
    done
    SERIES_PIDS=
}

on_signal() {
    trap '' INT TERM HUP
    INTERRUPTED=1
    case $1 in INT) _code=130 ;; HUP) _code=129 ;; *) _code=143 ;; esac
    # collectors in the signalled process group end with this code: stopped, not failed
    STOP_SIGRC=$_code
    [ -n "$RING_MIN" ] && _code=0
    if [ -n "$RING_MIN" ]; then
        say "caught SIG$1: stopping the flight recorder"
    else
        say "caught SIG$1: stopping the collectors and writing the bundle (kill -9 to abort)"
    fi
    [ -n "$NAP_PID" ] && kill -TERM "$NAP_PID" 2>/dev/null
    if [ -n "$ONESHOT_PID" ]; then
        kill -TERM "$ONESHOT_PID" 2>/dev/null
        wait "$ONESHOT_PID" 2>/dev/null
        ONESHOT_PID=
    fi
    [ -n "$STOP_REASON" ] || STOP_REASON=interrupted
    finish
    exit "$_code"
}
on_exit() {
    _rc=$?
    if [ -z "$FINISHED" ] && [ -n "$WORK" ]; then
        trap '' INT TERM HUP
        [ -n "$STOP_REASON" ] || STOP_REASON=error
        finish
    fi
    return "$_rc"
}

# before stopping the collectors: a full disk (not yet noticed) gives the reserve back
disk_before_stop() {
    [ -z "$DISK_STOPPED" ] && [ -n "$SERIES_PIDS" ] || return 0
    if free_kb && [ "$FREE_KB" -lt "$DISK_MIN_KB" ]; then
        disk_stop disk_full "the output filesystem is full ($FREE_KB KiB free): stopping collectors"
    fi
    return 0
}

finish() {
    [ -z "$FINISHING" ] || return 0
    FINISHING=1
    [ -n "$WORK" ] || return 0
    cd "$WORK" || return 0
    [ "$STOP_REASON" = duration ] || disk_before_stop
    if [ -n "$RING_MIN" ]; then
        stop_series
        rm -f .state/reserve
        clock_snapshot end
        meta stop_reason s "$STOP_REASON"
        write_manifest 1
        rm -f recorder.pid .state/*.fifo
        say "flight recorder stopped ($STOP_REASON) after $DUMPS bundle(s); the ring is left in $WORK"
        FINISHED=1
        return 0
    fi
    if [ "$STOP_REASON" = duration ]; then
        take_snapshots end
        disk_before_stop
    fi
    stop_series
    rm -f .state/reserve
    clock_snapshot end
    meta stop_reason s "$STOP_REASON"
    say "capture finished ($STOP_REASON); writing the bundle"
    write_manifest 1
    if [ -s .state/summary ]; then
        say "summary of collectors that did not run fully:"
        while IFS= read -r _l; do say "$_l"; done <.state/summary
    fi
    rm -rf .state
    make_tarball
    FINISHED=1
}

make_tarball() {
    cd "$OUT_ABS" || return 0
    _tmp=$NAME.tgz.part
    # manifest.json first: analyze starts parsing each file as soon as it is read from the
    # archive, which it can only do once it has the manifest (times, units, commands).
    set -- "$NAME/manifest.json"
    for _f in "$NAME"/* "$NAME"/.[!.]*; do
        [ -e "$_f" ] && [ "$_f" != "$NAME/manifest.json" ] && set -- "$@" "$_f"
    done
    [ -e "$NAME/manifest.json" ] || shift
    [ $# -gt 0 ] || set -- "$NAME"
    if _e=$(tar -czf "$_tmp" "$@" 2>&1) || { [ -s "$_tmp" ] && gzip -t "$_tmp" 2>/dev/null; }; then
        mv -f "$_tmp" "$NAME.tgz"
    elif _e=$(tar -cf - "$@" 2>&1 | gzip -c >"$_tmp") && [ -s "$_tmp" ]; then
        mv -f "$_tmp" "$NAME.tgz"
    else
        rm -f "$_tmp"
        say "could not write $OUT_ABS/$NAME.tgz ($_e); the directory is a valid bundle: $OUT_ABS/$NAME"
        printf '%s\n' "$OUT_ABS/$NAME"
        return 0
    fi
    _kb=$(du -k "$NAME.tgz" 2>/dev/null)
    if [ -n "$KEEP_DIR" ]; then
        say "bundle: $OUT_ABS/$NAME.tgz (${_kb%%[!0-9]*} KiB); directory kept: $OUT_ABS/$NAME"
    else
        say "bundle: $OUT_ABS/$NAME.tgz (${_kb%%[!0-9]*} KiB)"
    fi
    say "next: analyze $NAME.tgz   (copy it off the host first)"
    printf '%s\n' "$OUT_ABS/$NAME.tgz"
}

# ---------------------------------------------------------------- flight recorder (--ring)
# Every collector's output is cut into time slots: series/<name>.<slot> holds what it
# printed while epoch / RING_SLOT_S was <slot>; the lines before its first record (banner,
# column headers) are kept apart in series/<name>.head. Slots older than RING_KEEP are
# deleted by the writers themselves, so disk use stays bounded even if this script dies.
# A dump (SIGUSR1, --dump, a trigger) assembles head + the kept slots of each collector
# into a normal bundle next to the recorder directory. Formula: docs/capture.md.

# rotator for one collector stream (sysstat, dmesg, nvidia-smi dmon, bpftrace); also
# evaluates the dmesg and gpu triggers. Modes: blank (sysstat text: records end with a
# blank line), vm (vmstat), dmon (nvidia-smi dmon), bt (bpftrace), any (dmesg).
RING_AWK='
function now(   t) { srand(); t = srand(); return t }
function roll(s,    k) {
    if (out != "") close(out)
    cur = s; out = "series/" name "." s; bytes = 0; want = 0
    made[s] = 1
    for (k in made) if (k + 0 < s - keep) { system("rm -f series/" name "." k); delete made[k] }
    segmax = cap(); rechecked = 0
    for (k in DR) if (k + 0 < s - keep) { delete DR[k]; dirty = 1 }
    save_drops()
    if (system("kill -0 " main " 2>/dev/null") != 0) exit 0
}
# lines dropped per kept slot: .state/<name>.dropped, "slot count" lines
function save_drops(   k) {
    if (!dirty) return
    printf "" > dropf
    for (k in DR) print k, DR[k] > dropf
    close(dropf); dirty = 0; lastsave = now()
}
function cap(   v, c) { c = 0; if ((getline v < capf) > 0 && v + 0 > 0) c = v + 0; close(capf); return c }
function fire(tn, value) {
    print now() "\t" tn "\t" value >> fired
    close(fired)
    system("kill -USR1 " main " 2>/dev/null")
}
function cmp(v, op, x) { return (op == ">") ? v > x : (op == "<") ? v < x : (op == ">=") ? v >= x : v <= x }
function gpu_header(   i, n, f) {
    n = split(substr($0, 2), f, " ")
    for (i = 1; i <= n; i++) COL[f[i]] = i
}
function gpu_check(t,    i, c, g, v, key) {
    if (!("gpu" in COL)) return
    g = $(COL["gpu"])
    for (i = 1; i <= ntr; i++) {
        c = TM[i]; if (c == "util") c = "sm"
        if (!(c in COL)) continue
        v = $(COL[c]); key = i SUBSEP g
        if (v !~ /^[0-9.]+$/) continue
        if (cmp(v + 0, TO[i], TV[i] + 0)) {
            if (!(key in SINCE)) SINCE[key] = t
            if (!(key in DONE) && t - SINCE[key] >= TF[i]) { DONE[key] = 1; fire(TN[i], "gpu " g " " c "=" v) }
        } else { delete SINCE[key]; delete DONE[key] }
    }
}
BEGIN {
    headf = "series/" name ".head"; capf = ".state/cap." name; dropf = ".state/" name ".dropped"
    head = (mode != "any"); segmax = 0; ntr = 0
    while ((getline l < trigs) > 0) {
        split(l, a, "\t")
        if ((mode == "any" && a[1] == "dmesg") || (mode == "dmon" && a[1] == "gpu")) {
            ntr++; TK[ntr] = a[1]; TN[ntr] = a[2]; TM[ntr] = a[3]; TO[ntr] = a[4]; TV[ntr] = a[5]; TF[ntr] = a[6] + 0
        }
    }
    close(trigs)
    if (head) printf "" > headf
}
mode == "dmon" && /^#/ && $0 !~ /^# *Idx|^#YYYY/ { gpu_header() }
head {
    if (mode == "blank") { print > headf; if ($0 == "") { head = 0; close(headf) }; next }
    if (mode == "vm") { print > headf; if ($1 ~ /^[0-9]+$/) { head = 0; close(headf) }; next }
    if (mode == "dmon" && /^#/) { print > headf; next }
    if (mode == "bt" && $0 !~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T/) { print > headf; next }
    head = 0; close(headf)
}
{
    t = now(); s = int(t / p)
    if (out == "") roll(s)
    else if (s != cur) {
        if (!want) want = t
        if (mode == "any" || mode == "vm" || mode == "dmon" || t - want > 2 * p) roll(s)
        else if (mode == "blank" && last == "") roll(s)
        else if (mode == "bt" && $0 ~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T/) roll(s)
    }
    if (segmax > 0 && bytes + length($0) + 1 > segmax && !rechecked) { segmax = cap(); rechecked = 1 }
    if (segmax > 0 && bytes + length($0) + 1 > segmax) { DR[cur]++; dirty = 1; if (t - lastsave >= 1) save_drops() }
    else { print > out; fflush(out); bytes += length($0) + 1 }
    last = $0
    for (i = 1; i <= ntr; i++) if (TK[i] == "dmesg" && index($0, TM[i])) fire(TN[i], substr($0, 1, 200))
    if (mode == "dmon" && ntr && $0 !~ /^#/) gpu_check(t)
}
END { save_drops() }
'
RING_SH='name=$1 mode=$2 prog=$3
shift 3
fifo=.state/$name.fifo
rm -f "$fifo"
mkfifo "$fifo" || exit 1
i=
[ -n "$RING_AWK_I" ] && i="-W interactive" # mawk reads pipes in blocks without it
awk $i -v name="$name" -v mode="$mode" -v p="$RING_SLOT_S" -v keep="$RING_KEEP" -v main="$RING_MAIN" \
    -v trigs=.state/triggers -v fired=.state/fired "$prog" <"$fifo" &
rot=$!
"$@" >"$fifo" &
tool=$!
trap '\''kill "$tool" "$rot" 2>/dev/null'\'' TERM INT HUP
wait "$tool"
rc=$?
kill -0 "$tool" 2>/dev/null && { wait "$tool"; rc=$?; }
wait "$rot"
rm -f "$fifo"
exit "$rc"'

# trigger specs -> .state/triggers: kind, spec, what, op, value, for_s (TAB-separated)
TRIGGER_AWK='
function bad(why) { printf "bad --trigger %s: %s\n", spec, why > "/dev/stderr"; err = 1 }
$0 == "" { next }
{
    spec = $0; rest = $0; fr = 0
    if (index(spec, "\t")) { bad("no tabs, please"); next }
    if (match(rest, /:for=[0-9]+$/)) { fr = substr(rest, RSTART + 5) + 0; rest = substr(rest, 1, RSTART - 1) }
    kind = rest; sub(/:.*/, "", kind); rest = substr(rest, length(kind) + 2)
    if (kind == "dmesg") {
        if (rest == "") { bad("dmesg:TEXT needs a text"); next }
        printf "dmesg\t%s\t%s\t\t\t0\n", spec, rest; next
    }
    if (!match(rest, /(>=|<=|>|<)-?[0-9]+(\.[0-9]+)?$/)) { bad("needs a comparison such as >20 or <10"); next }
    what = substr(rest, 1, RSTART - 1); cond = substr(rest, RSTART)
    op = cond; sub(/[-0-9.]+$/, "", op); val = substr(cond, length(op) + 1)
    if (kind == "psi") {
        n = split(what, f, ":")
        if (n != 3 || f[1] !~ /^(cpu|memory|io|irq)$/ || f[2] !~ /^(some|full)$/ || f[3] !~ /^(avg10|avg60|avg300)$/) {
            bad("psi:RESOURCE:some|full:avg10|avg60|avg300 (resource cpu, memory, io, irq)"); next
        }
    } else if (kind == "gpu") {
        if (what !~ /^[a-z][a-z0-9]*$/) { bad("gpu:METRIC, METRIC one of util, mem, pwr, gtemp, mtemp, ... (nvidia-smi dmon columns)"); next }
    } else { bad("kinds are psi, dmesg and gpu"); next }
    printf "%s\t%s\t%s\t%s\t%s\t%d\n", kind, spec, what, op, val, fr
}
END { exit err }
'
# epoch -> "YYYY-MM-DDTHH:MM:SSZ"; with -v hms=HH:MM:SS: the UTC date of a row stamped
# hms and read at epoch e (the row can be from just before midnight)
EPOCH_AWK='
function civil(days,    z, era, doe, yoe, y, doy, mp, d, m) {
    z = days + 719468; era = int((z >= 0 ? z : z - 146096) / 146097); doe = z - era * 146097
    yoe = int((doe - int(doe / 1460) + int(doe / 36524) - int(doe / 146096)) / 365)
    y = yoe + era * 400; doy = doe - (365 * yoe + int(yoe / 4) - int(yoe / 100))
    mp = int((5 * doy + 2) / 153); d = doy - int((153 * mp + 2) / 5) + 1; m = mp < 10 ? mp + 3 : mp - 9
    return sprintf("%04d-%02d-%02d", y + (m <= 2), m, d)
}
BEGIN {
    e = int(e); days = int(e / 86400); sod = e - days * 86400
    if (hms != "") {
        split(hms, h, ":"); r = h[1] * 3600 + h[2] * 60 + h[3]
        if (r < sod - 43200) days++
        else if (r > sod + 43200) days--
        print civil(days)
    } else printf "%sT%02d:%02d:%02dZ\n", civil(days), int(sod / 3600), int(sod % 3600 / 60), sod % 60
}
'

ring_mode_of() {
    case $1 in
    vmstat) RING_MODE=vm ;;
    mpstat | mpstat_irq | sar | pidstat) RING_MODE=blank ;;
    iostat | bpf_* | perf_stacks) RING_MODE=bt ;;
    nvidia_dmon) RING_MODE=dmon ;;
    *) RING_MODE=any ;;
    esac
}

# collector weights for the per-slot caps: busy outputs get a bigger share
ring_weight() {
    case $1 in
    mpstat) RING_W=$((1 + ${CPUS:-1} / 8)) ;;
    mpstat_irq) RING_W=$((1 + ${CPUS:-1} * INTERVAL / (4 * IRQ_IV))) ;;
    cgroup) RING_W=$((1 + ${CG_COUNT:-0})) ;;
    sar | meminfo | proc_vmstat) RING_W=2 ;;
    *) RING_W=1 ;;
    esac
    is_uint "$RING_W" || RING_W=1
}

# the per-slot cap of each collector (.state/cap.<name>): half of --max-mb for the ring
# (the other half is for assembling a dump), less what snapshots and logs use, shared
# by weight among the collectors and the RING_KEEP + 2 slots each can have on disk
ring_budget() {
    _names=$1 _used_kb=$2
    _avail_kb=$((MAX_MB * 512 - _used_kb - 512))
    _wsum=0
    for _x in $_names; do
        ring_weight "$_x"
        _wsum=$((_wsum + RING_W))
    done
    [ "$_wsum" -gt 0 ] || _wsum=1
    SEG_MAX=$((_avail_kb * 1024 / (_wsum * (RING_KEEP + 2))))
    [ "$SEG_MAX" -ge 2048 ] || return 1
    for _x in $_names; do
        ring_weight "$_x"
        printf '%s\n' "$((SEG_MAX * RING_W))" >".state/cap.$_x"
    done
}

ring_setup() {
    RING_S=$((RING_MIN * 60))
    RING_KEEP=4
    RING_SLOT_S=$(((RING_S + RING_KEEP - 1) / RING_KEEP))
    [ "$RING_SLOT_S" -ge "$INTERVAL" ] || RING_SLOT_S=$INTERVAL
    RING_MAIN=$$
    RING_AWK_I=$AWK_INTERACTIVE
    export RING_SLOT_S RING_KEEP RING_MAIN RING_AWK_I
    [ -n "$COOLDOWN" ] || COOLDOWN=$RING_S
    : >.state/fired
    printf '%s\n' "$$" >recorder.pid
    if [ -n "$TRIGGERS" ]; then
        printf '%s' "$TRIGGERS" | awk "$TRIGGER_AWK" >.state/triggers || die "no recorder started"
    else
        : >.state/triggers
    fi
    # a first estimate (every collector, 1 MiB of snapshots); corrected once they run
    ring_budget "$RING_ALL" 1024 || die "--max-mb $MAX_MB is too small for a flight recorder"
    meta ring_minutes n "$RING_MIN"
    meta ring_segment_s n "$RING_SLOT_S"
    meta ring_segments_kept n "$((RING_KEEP + 1))"
    meta ring_slot_unit_bytes n "$SEG_MAX"
    meta ring_cooldown_s n "$COOLDOWN"
    meta ring_max_dumps n "$MAX_DUMPS"
    meta recorder_start_utc s "$START_UTC"
    set --
    while IFS="$TAB" read -r _ _spec _; do set -- "$@" "$_spec"; done <.state/triggers
    meta_list ring_triggers "$@"
    say "flight recorder: keeping the last $RING_MIN min in $((RING_KEEP + 1)) slots of $RING_SLOT_S s; dumps go to $OUT_ABS"
}

ring_resize() {
    _names=
    for _e in $SERIES_PIDS; do
        _rest=${_e#*:}
        _names="$_names ${_rest%%:*}"
    done
    _used=$(du -sk . 2>/dev/null) || _used=0
    _used=${_used%%[!0-9]*}
    if ! ring_budget "$_names" "${_used:-0}"; then
        STOP_REASON=max_mb
        err "--max-mb $MAX_MB leaves no room for the ring: snapshots and logs already use ${_used} KiB"
        return 1
    fi
    meta ring_slot_unit_bytes n "$SEG_MAX"
    say "flight recorder: at most $SEG_MAX bytes per slot and weight unit (docs/capture.md)"
    return 0
}

# trim collector stderr files (append mode) so that a chatty tool cannot fill the disk
ring_trim_logs() {
    find series .state -name '*.err' -size +256 2>/dev/null | while IFS= read -r _f; do
        tail -c 65536 "$_f" >"$_f.t" 2>/dev/null && cat "$_f.t" >"$_f"
        rm -f "$_f.t"
    done
    if [ -f "$LOG" ] && [ -n "$(find "$LOG" -size +2048 2>/dev/null)" ]; then
        tail -n 2000 "$LOG" >"$LOG.t" && cat "$LOG.t" >"$LOG"
        rm -f "$LOG.t"
    fi
}

ring_loop() {
    uptime_now
    _end=$((START_UP + RING_LIFETIME))
    _last_manifest=$UP _last_check=$UP
    ring_resize || return 0
    write_manifest 0
    while :; do
        [ -z "$DISK_STOPPED" ] || return 0
        uptime_now
        [ "$UP" -lt "$_end" ] || break
        nap 5
        ring_dumps
        uptime_now
        if [ $((UP - _last_check)) -ge 30 ]; then
            ring_trim_logs
            check_limits || return 0
            _last_check=$UP
        fi
        if [ $((UP - _last_manifest)) -ge 60 ]; then
            write_manifest 0
            _last_manifest=$UP
        fi
    done
    STOP_REASON=ring_lifetime
}

# handle what arrived: --dump requests, trigger firings, a plain SIGUSR1
ring_dumps() {
    _sig=$USR1_PENDING
    USR1_PENDING=
    for _r in .state/dump.req.*; do
        [ -e "$_r" ] || continue
        _id=${_r##*.}
        rm -f "$_r"
        _sig=
        if ring_cut request --dump "$(date +%s)" ""; then _res=$CUT_PATH; else _res="error: $CUT_ERROR"; fi
        printf '%s\n' "$_res" >".state/dump.done.$_id.t" && mv -f ".state/dump.done.$_id.t" ".state/dump.done.$_id"
    done
    _total=$(wc -l <.state/fired | tr -d ' ')
    if [ "$_total" -gt "$FIRED_SEEN" ]; then
        _sig=
        tail -n "+$((FIRED_SEEN + 1))" .state/fired | head -n "$((_total - FIRED_SEEN))" >.state/fired.new
        FIRED_SEEN=$_total
        while IFS="$TAB" read -r _t _tn _val; do
            _now=$(date +%s)
            if [ -n "$LAST_TRIGGER_DUMP" ] && [ $((_now - LAST_TRIGGER_DUMP)) -lt "$COOLDOWN" ]; then
                SUPPRESSED=$((SUPPRESSED + 1))
                say "trigger $_tn fired ($_val): ignored, cool-down ($COOLDOWN s) since the last triggered bundle"
            elif [ "$TRIGGER_DUMPS" -ge "$MAX_DUMPS" ]; then
                SUPPRESSED=$((SUPPRESSED + 1))
                say "trigger $_tn fired ($_val): ignored, --max-dumps $MAX_DUMPS reached"
            else
                say "trigger $_tn fired ($_val): cutting a bundle"
                LAST_TRIGGER_DUMP=$_now
                TRIGGER_DUMPS=$((TRIGGER_DUMPS + 1))
                ring_cut trigger "$_tn" "$_t" "$_val" </dev/null || true
            fi
        done <.state/fired.new
        rm -f .state/fired.new
    fi
    if [ -n "$_sig" ]; then
        say "SIGUSR1: cutting a bundle"
        ring_cut signal SIGUSR1 "$(date +%s)" "" || true
    fi
}

# ring_cut SOURCE NAME EPOCH VALUE: assemble the kept slots into a bundle, pack it
ring_cut() {
    _src=$1 _tname=$2 _tepoch=$3 _tval=$4
    CUT_PATH='' CUT_ERROR=''
    _now=$(date +%s)
    _slot=$((_now / RING_SLOT_S))
    _from=$(((_slot - RING_KEEP) * RING_SLOT_S))
    _st=$(awk -v e="$START_EPOCH" 'BEGIN { print int(e) }')
    [ "$_from" -ge "$_st" ] || _from=$_st
    _used=$(du -sk series 2>/dev/null) || _used=0
    if free_kb && [ "$FREE_KB" -lt $((MIN_FREE_MB * 1024 + ${_used%%[!0-9]*} * 2)) ]; then
        CUT_ERROR="only $((FREE_KB / 1024)) MiB free on the output filesystem (floor --min-free-mb $MIN_FREE_MB)"
        say "not cutting a bundle: $CUT_ERROR"
        return 1
    fi
    _stamps=$(date -u '+%Y%m%dT%H%M%SZ')
    _dname=hindsight-$HOST_TAG-$_stamps
    _n=1
    while [ -e "$OUT_ABS/$_dname" ] || [ -e "$OUT_ABS/$_dname.tgz" ]; do
        _n=$((_n + 1))
        _dname=hindsight-$HOST_TAG-$_stamps-$_n
    done
    _stage=$OUT_ABS/$_dname
    if ! mkdir "$_stage" "$_stage/series" "$_stage/snap" "$_stage/.state"; then
        CUT_ERROR="cannot create $_stage"
        rm -rf "$_stage"
        return 1
    fi
    say "cutting $_dname ($_src: $_tname), data from $(awk -v e="$_from" "$EPOCH_AWK")"
    for _e in $SERIES_PIDS; do
        _rest=${_e#*:}
        ring_assemble "${_rest%%:*}" "$_stage" "$((_from / RING_SLOT_S))"
    done
    cp -p snap/*.start.* "$_stage/snap/" 2>/dev/null
    [ -d snap/pstore ] && cp -Rp snap/pstore "$_stage/snap/" 2>/dev/null
    tail -n 2000 "$LOG" >"$_stage/capture.log" 2>/dev/null
    cp -p .state/meta .state/reg .state/*.list .state/*.dropped .state/*.note "$_stage/.state/" 2>/dev/null
    CUT_PATH=$(
        cd "$_stage" || exit 1
        # a full disk while cutting must not stop the recorder's collectors from here
        SERIES_PIDS=''
        WORK=$_stage LOG=$_stage/capture.log NAME=$_dname KEEP_DIR='' DUMPING=1 FIRST_SLOT=$((_from / RING_SLOT_S))
        meta start_utc s "$(awk -v e="$_from" "$EPOCH_AWK")"
        meta start_epoch_s n "$_from"
        meta start_uptime_s n "$(awk -v e="$_from" -v b="$BOOT_EPOCH" 'BEGIN { printf "%.2f", e - b }')"
        meta duration_s n "$((_now - _from))"
        meta trigger_source s "$_src"
        meta trigger_name s "$_tname"
        meta trigger_utc s "$(awk -v e="$_tepoch" "$EPOCH_AWK")"
        meta trigger_epoch_s n "$_tepoch"
        if [ -n "$_tval" ]; then meta trigger_value s "$_tval"; else meta trigger_value z ""; fi
        meta ring_dumps n "$((DUMPS + 1))"
        meta ring_suppressed n "$SUPPRESSED"
        take_snapshots end
        import_history "$(awk -v e="$_from" "$EPOCH_AWK")"
        clock_snapshot end
        meta stop_reason s dump
        write_manifest 1
        rm -rf .state
        make_tarball
    )
    rm -rf "$_stage"
    case $CUT_PATH in
    *.tgz)
        DUMPS=$((DUMPS + 1))
        printf '%s\n' "$CUT_PATH"
        return 0
        ;;
    esac
    CUT_ERROR="could not write the bundle (see capture.log)"
    rm -f "$OUT_ABS/$_dname.tgz.part"
    return 1
}

# ring_assemble NAME STAGE FIRST_SLOT: head (banner date set to the first kept row's
# day) + the kept slots, in order, into STAGE/series/NAME.out
ring_assemble() {
    _an=$1 _as=$2 _af=$3
    _o=$_as/series/$_an.out
    set --
    for _f in series/"$_an".[0-9]*; do
        [ -e "$_f" ] || continue
        [ "${_f##*.}" -ge "$_af" ] && set -- "$@" "$_f"
    done
    : >"$_o"
    if [ -s "series/$_an.head" ]; then
        ring_mode_of "$_an"
        if [ "$RING_MODE" = blank ] && [ $# -gt 0 ]; then
            _hms=$(awk '/^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]/ { print substr($0, 1, 8); exit }' "$@")
            _day=$(awk -v e="$((${1##*.} * RING_SLOT_S))" -v hms="${_hms:-00:00:00}" "$EPOCH_AWK")
            sed "1s/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]/$_day/" "series/$_an.head" >>"$_o"
        else
            cat "series/$_an.head" >>"$_o"
        fi
    fi
    [ $# -gt 0 ] && cat "$@" >>"$_o"
    cp -p "series/$_an.err" "$_as/series/" 2>/dev/null
    [ -e "series/$_an.status" ] && cp -p "series/$_an.status" "$_as/series/"
    return 0
}

# --dump: ask the running recorder under OUT_DIR for a bundle, print its path
dump_client() {
    _pid=''
    for _d in "$OUT_PARENT"/hindsight-recorder-*; do
        [ -f "$_d/recorder.pid" ] || continue
        read -r _p <"$_d/recorder.pid" || continue
        if is_uint "$_p" && kill -0 "$_p" 2>/dev/null; then
            _pid=$_p _dir=$_d
            break
        fi
    done
    [ -n "$_pid" ] || die "no running flight recorder under $OUT_PARENT (give the recorder's -o DIR)"
    _id=$$
    : >"$_dir/.state/dump.req.$_id" || die "cannot write in $_dir/.state (run as the recorder's user)"
    kill -USR1 "$_pid" || die "cannot signal the recorder (pid $_pid)"
    say "asked the flight recorder (pid $_pid) for a bundle; waiting"
    _t=0
    while [ ! -e "$_dir/.state/dump.done.$_id" ]; do
        [ "$_t" -lt 600 ] || die "no answer from the recorder within 300 s"
        sleep 0.5 2>/dev/null || sleep 1
        _t=$((_t + 1))
    done
    read -r _res <"$_dir/.state/dump.done.$_id"
    rm -f "$_dir/.state/dump.done.$_id"
    case $_res in
    error:*) die "the recorder could not cut a bundle: ${_res#error: }" ;;
    esac
    printf '%s\n' "$_res"
}

on_usr1() {
    USR1_PENDING=1
    [ -n "$NAP_PID" ] && kill -TERM "$NAP_PID" 2>/dev/null
    return 0
}

# ---------------------------------------------------------------- main loop
run_loop() {
    uptime_now
    _end=$((START_UP + DURATION))
    [ "$DURATION" = 0 ] && _end=$((START_UP + 86400))
    _last_manifest=$UP
    while :; do
        [ -z "$DISK_STOPPED" ] || return 0
        uptime_now
        [ "$UP" -lt "$_end" ] || break
        _step=$((_end - UP))
        # on a terminal: a countdown line, rewritten in place (never in capture.log)
        [ "$DURATION" != 0 ] && [ -t 2 ] && printf '\rhindsight: capturing, %s s left  ' "$_step" >&2
        [ "$_step" -gt 5 ] && _step=5
        nap "$_step"
        check_limits || return 0
        uptime_now
        if [ $((UP - _last_manifest)) -ge 10 ]; then
            write_manifest 0
            _last_manifest=$UP
        fi
    done
    [ "$DURATION" != 0 ] && [ -t 2 ] && printf '\r%40s\r' '' >&2
    STOP_REASON=duration
}

main() {
    DURATION=60 INTERVAL=1 OUT_PARENT=. PIDS='' CGROUP_SPECS=''
    NO_BPF=false NO_STACKS=false NO_GPU=false SAFE_MODE=false MAX_MB=500 MIN_FREE_MB=100 HISTORY_HOURS=6
    IOSTAT_JSON=false IRQ_INTERVAL='' IRQ_IV=10 RESERVE_KB=256 DISK_MIN_KB=64 DISK_STOPPED='' NO_ROOM='' STOP_SIGRC=''
    SA_DIRS=${HINDSIGHT_SA_DIRS:-/var/log/sysstat /var/log/sa}
    WORK='' LOG='' SAMPLERS='' SPAWN_EXTRA_ST='' SNAP_CMD='' NAP_PID='' ONESHOT_PID='' SPAWN_PID='' SERIES_PIDS='' _cmd_override=''
    APP_URLS='' APP_LOGS='' APP_PATTERNS='' APP_BUDGET=0
    RING_MIN='' TRIGGERS='' COOLDOWN='' MAX_DUMPS=20 DUMP_CLIENT='' USR1_PENDING='' FIRED_SEEN=0 DUMPS=0 TRIGGER_DUMPS=0
    SUPPRESSED=0 LAST_TRIGGER_DUMP='' KEEP_DIR=1 DUMPING=0 BOOT_EPOCH=0 START_EPOCH=0 HOST_TAG=unknown
    RING_LIFETIME=${HINDSIGHT_RING_LIFETIME:-604800}
    RING_ALL="vmstat iostat mpstat mpstat_irq sar pidstat psi cgroup meminfo proc_vmstat infiniband dmesg nvidia_dmon bpf_runqlat bpf_biolat bpf_stacks perf_stacks"
    is_uint "$RING_LIFETIME" || RING_LIFETIME=604800
    INTERRUPTED=0 STOPPED=0 PIDS_AUTO=false STOP_REASON='' FINISHING='' FINISHED='' GPU_OK='' GPU_HUNG='' DMESG_ISO='' _restrict=0
    parse_args "$@"
    irq_interval
    _nl=$(printf '%s' "$APP_LOGS" | wc -l)
    _np=$(printf '%s' "$APP_PATTERNS" | wc -l)
    [ "$_nl" -eq "$_np" ] || die "each --app-log FILE needs one --app-pattern ERE (got $((_nl)) and $((_np)))"
    if [ -n "$TRIGGERS" ]; then
        [ -n "$RING_MIN" ] || die "--trigger needs --ring MINUTES"
        printf '%s' "$TRIGGERS" | awk "$TRIGGER_AWK" >/dev/null || die "no recorder started"
    fi
    if [ -n "$DUMP_CLIENT" ]; then
        dump_client
        return 0
    fi

    ORIG_TZ=${TZ:-}
    LC_ALL=C TZ=UTC0 S_TIME_FORMAT=ISO S_COLORS=never
    export LC_ALL TZ S_TIME_FORMAT S_COLORS
    for _d in /usr/sbin /sbin; do
        case ":$PATH:" in *":$_d:"*) ;; *) [ -d "$_d" ] && PATH=$PATH:$_d ;; esac
    done
    export PATH
    # the kernel should kill the capture before the workload
    printf '1000\n' >/proc/self/oom_score_adj 2>/dev/null || true
    for _c in awk date sleep mkdir tar gzip; do need_cmd "$_c"; done

    detect_features
    host_facts
    make_workdir
    reserve_space || NO_ROOM=1
    read -r START_UP _ </proc/uptime
    START_UP=${START_UP%.*}
    trap 'on_signal INT' INT
    trap 'on_signal TERM' TERM
    trap 'on_signal HUP' HUP
    trap 'on_exit' EXIT
    if [ -n "$RING_MIN" ]; then
        trap 'on_usr1' USR1
    else
        trap 'say "SIGUSR1 ignored: this is not a flight recorder (--ring)"' USR1
    fi
    if [ -n "$RING_MIN" ]; then
        say "hindsight-capture $CAPTURE_VERSION: flight recorder, last $RING_MIN min every ${INTERVAL} s, in $WORK"
    else
        say "hindsight-capture $CAPTURE_VERSION: ${DURATION} s every ${INTERVAL} s into $WORK"
    fi
    [ "$IS_ROOT" = true ] || say "not root: dmesg, bpftrace, pstore and other users' details may be skipped"
    PS_PROCPS=
    if ps -eo pid --sort=-pcpu >/dev/null 2>&1; then PS_PROCPS=1; fi

    meta format_version n "$FORMAT_VERSION"
    meta capture_version s "$CAPTURE_VERSION"
    meta hostname s "$HOSTNAME_"
    meta kernel s "$KERNEL"
    meta os s "$OS"
    meta arch s "$ARCH"
    meta cpus n "$CPUS"
    meta start_utc s "$START_UTC"
    meta interval_s n "$INTERVAL"
    meta duration_s n "$DURATION"
    meta timezone s "$TIMEZONE"
    [ -n "$TIMEZONE" ] || meta timezone z ""
    meta utc_offset s "$UTC_OFFSET"
    meta uid n "$USER_ID"
    meta root b "$IS_ROOT"
    meta safe_mode b "$SAFE_MODE"
    meta no_bpf b "$NO_BPF"
    meta no_gpu b "$NO_GPU"
    meta max_mb n "$MAX_MB"
    meta min_free_mb n "$MIN_FREE_MB"
    meta iostat_json b "$IOSTAT_JSON"
    meta irq_interval_s n "$IRQ_IV"
    meta_list args "$@"
    : >.state/reg
    clock_snapshot start
    [ -n "$RING_MIN" ] && ring_setup
    write_manifest 0

    if [ -n "$NO_ROOM" ]; then
        STOP_REASON=disk_full
        say "less than $RESERVE_KB KiB free on the output filesystem: not collecting"
        finish
        return 0
    fi
    if free_kb && [ "$FREE_KB" -lt $((MIN_FREE_MB * 1024)) ]; then
        STOP_REASON=disk_floor
        say "only $((FREE_KB / 1024)) MiB free on the output filesystem (floor $MIN_FREE_MB MiB): not collecting"
        finish
        return 0
    fi

    resolve_targets
    cgroup_lists
    start_series
    start_gpu
    start_app
    [ -n "$RING_MIN" ] && ring_resize
    write_manifest 0
    take_snapshots start
    if [ -n "$RING_MIN" ]; then
        [ -n "$DISK_STOPPED" ] || ring_loop
        finish
        return 0
    fi
    import_history "${HINDSIGHT_HISTORY_UNTIL:-$START_UTC}"
    write_manifest 0
    run_loop
    say "capture window over"
    finish
}

main "$@" || exit 1
