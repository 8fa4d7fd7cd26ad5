#!/usr/bin/env bash
# CI's real-Slurm check: installs Debian's slurm-wlm + munge when missing, then runs
# the hidden [slurm] test, which starts a private single-node cluster
# (test/sweep/slurm_cluster.sh) and runs a sweep through sbatch job arrays.
# Where that cannot run (not root, packages not installable), it says so and why.
#   scripts/ci-slurm.sh          after scripts/test.sh has built build/
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[ci-slurm] %s\n' "$*"; }
tests=${PRISM_BUILD_DIR:-build}/test/prism_tests
[ -x "$tests" ] || { say "error: $tests not built. Fix: run scripts/test.sh first"; exit 2; }
if [ "$(id -u)" != 0 ]; then
  say "SKIPPED: the [slurm] test needs root (slurmd launches the jobs); run it as root: $tests '[slurm]'"
  exit 0
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  say "installing slurm-wlm and munge"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurm-wlm munge > /tmp/ci-slurm-apt.log 2>&1 \
    || { say "SKIPPED: apt-get could not install slurm-wlm/munge (log: /tmp/ci-slurm-apt.log)"; exit 0; }
fi
# Preflight: a cluster that cannot start here (no cgroups, ports taken...) is reported,
# with slurmctld's and slurmd's own words, rather than failing the build.
probe=$(mktemp -d)
if ! test/sweep/slurm_cluster.sh start "$probe/state" > "$probe/start.log" 2>&1; then
  say "SKIPPED: a single-node Slurm cluster could not start on this machine:"
  tail -n 5 "$probe/start.log" "$probe"/state/log/*.log 2>/dev/null | sed 's/^/[ci-slurm]   /' || true
  test/sweep/slurm_cluster.sh stop "$probe/state" || true
  exit 0
fi
test/sweep/slurm_cluster.sh stop "$probe/state"
rm -rf "$probe"
start=$(date +%s)
"$tests" "[slurm]"
say "real single-node Slurm sweep OK in $(( $(date +%s) - start )) s"
