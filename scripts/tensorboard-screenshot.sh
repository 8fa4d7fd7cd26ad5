#!/usr/bin/env bash
# Serves a TensorBoard log directory on localhost and photographs its dashboards with
# headless Chromium: how docs/tensorboard.png was made (by hand, not in CI).
# Needs Debian's chromium (apt-get install chromium) and the venv's tensorboard.
#   scripts/tensorboard-screenshot.sh LOGDIR OUT_PREFIX [PORT]
#   -> OUT_PREFIX.png (scalars), OUT_PREFIX-hparams.png (the HParams table)
set -euo pipefail
logdir=$1 out=$2 port=${3:-6017}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v chromium >/dev/null || { echo "error: no chromium. Fix: apt-get install chromium" >&2; exit 2; }
"$root/.venv/bin/tensorboard" --logdir "$logdir" --host 127.0.0.1 --port "$port" > "${TMPDIR:-/tmp}/prism-tensorboard-$port.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 1; done
shoot() {  # URL FILE: a wide window, time for the dashboard's scripts to load the runs
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,1000 \
    --virtual-time-budget=20000 --screenshot="$2" "$1" >/dev/null 2>&1
  echo "$2"
}
shoot "http://127.0.0.1:$port/?darkMode=false#timeseries" "$out.png"
shoot "http://127.0.0.1:$port/?darkMode=false#hparams" "$out-hparams.png"
