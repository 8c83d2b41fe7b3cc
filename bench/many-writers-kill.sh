#!/usr/bin/env bash
# The long run of issue 33's fault test (crates/cairn-cli/tests/many_writers_kill.rs):
# ROUNDS rounds (default 200) of three backups from different hosts and a
# garbage collection started together in one local repository, each
# process SIGKILLed with probability one half at a random moment; then
# every snapshot a backup reported committed restores byte for byte,
# `check --read-data` is clean, and nothing is left that no collection
# reclaims. CI runs the same test with 6 rounds.
#
#   bench/many-writers-kill.sh              # 200 rounds
#   ROUNDS=50 bench/many-writers-kill.sh
#   SEEDS="1 2 3" KEEP=/tmp/kill bench/many-writers-kill.sh   # one run per seed;
#                                         # each run's repository and log stay in a new directory under KEEP
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-200}
for seed in ${SEEDS:-2033}; do
    echo "== seed $seed"
    env CAIRN_FAULT_SEED=$seed ${KEEP:+CAIRN_FAULT_KEEP=$KEEP} CAIRN_FAULT_ROUNDS=$ROUNDS \
        cargo test --release --locked -p cairn-cli --test many_writers_kill -- --nocapture
done
