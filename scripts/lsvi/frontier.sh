#!/usr/bin/env bash
# Privacy-utility frontier of both LSVI-UCB plug-ins on lin-cube (d = 5, H = 5), K = 5000,
# 3 seeds, practical preset, honest ledgers (delta = 1e-5), plus the switching algorithm with
# the paper's calibration (its ledger spends far more than the epsilon it was given).
# Usage: bash scripts/lsvi/frontier.sh [OUT]   (then `privrl plot OUT/frontier-* ...`)
set -euo pipefail
out=${1:-results/lsvi}
for a in lsvi-ucb-batched lsvi-ucb-switching; do
  privrl run --algo "$a" --env lin-cube --privacy none jdp \
      --epsilon 10 100 1000 10000 100000 1000000 --episodes 5000 --seeds 3 --workers 1 \
      --quiet --force --out "$out/frontier-$a"
done
privrl run --algo lsvi-ucb-switching --env lin-cube --privacy jdp --knob calibration=paper \
    --epsilon 10 1000 100000 --episodes 5000 --seeds 3 --workers 1 --quiet --force \
    --out "$out/frontier-paper-lsvi-ucb-switching"
