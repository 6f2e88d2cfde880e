#!/usr/bin/env bash
# Policy switches vs K on lin-cube (d = 5, H = 5), practical preset, 3 seeds: the adaptive
# algorithm (JDP eps = 10, 100, and without noise), batched LSVI-UCB with App. E.1's B (JDP
# eps = 10, 100), and LSVI-UCB updated every episode (batched without noise: B = K).
# Usage: bash scripts/lsvi/switches.sh [OUT]   (then `privrl plot OUT/* --out PLOTS`)
set -euo pipefail
out=${1:-results/lsvi}
for k in 1000 3000 10000 30000 100000; do
  privrl run --algo lsvi-ucb-switching --env lin-cube --privacy none jdp --epsilon 10 100 \
      --episodes "$k" --seeds 3 --workers 1 --quiet --force --out "$out/switching-$k"
  privrl run --algo lsvi-ucb-batched --env lin-cube --privacy none jdp --epsilon 10 100 \
      --episodes "$k" --seeds 3 --workers 1 --quiet --force --out "$out/batched-$k"
done
