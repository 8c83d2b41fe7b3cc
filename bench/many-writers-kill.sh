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
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-200}
CAIRN_FAULT_ROUNDS=$ROUNDS cargo test --release --locked -p cairn-cli \
    --test many_writers_kill -- --nocapture
