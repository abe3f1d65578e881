#!/bin/sh
# Make a real capture on a GPU host: start the capture script, run the workload
# (training steps, synchronous checkpoints, a CPU-bound loader phase) during it, and
# put the bundle plus the workload's ground truth into $OUT (default ./out).
# Optional: SYSSTAT_ROOT=<dir with usr/bin/iostat...> when sysstat is not installed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${OUT:-$PWD/out}
secs=${SECONDS_TOTAL:-150}
mkdir -p "$out" /tmp/hs-capture
if [ -n "${SYSSTAT_ROOT:-}" ]; then
  mkdir -p /tmp/hs-bin
  for t in iostat mpstat pidstat sadf; do ln -sf "$SYSSTAT_ROOT/usr/bin/$t" /tmp/hs-bin/$t; done
  ln -sf "$SYSSTAT_ROOT/usr/bin/sar.sysstat" /tmp/hs-bin/sar
  if [ ! -e /usr/lib/sysstat/sadc ]; then
    mkdir -p /usr/lib/sysstat && cp "$SYSSTAT_ROOT/usr/lib/sysstat/sadc" /usr/lib/sysstat/sadc
  fi
  PATH=/tmp/hs-bin:$PATH
  LD_LIBRARY_PATH=$SYSSTAT_ROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PATH LD_LIBRARY_PATH
fi
nvidia-smi -L || true
sh "$repo/capture/hindsight-capture.sh" -d $((secs + 10)) -i 1 -o /tmp/hs-capture > "$out/capture-console.log" 2>&1 &
cap=$!
sleep 5
python3 "$here/workload.py" --seconds "$secs" --out /tmp/hs-ckpt --truth "$out/ground-truth.json" > "$out/workload.log" 2>&1 || echo "workload failed: $?" >> "$out/workload.log"
wait "$cap" || echo "capture exited $?" >> "$out/capture-console.log"
cp /tmp/hs-capture/*.tgz "$out/" 2>/dev/null || true
ls -la "$out" /tmp/hs-capture
tail -n 40 "$out/capture-console.log"
tail -n 20 "$out/workload.log"
