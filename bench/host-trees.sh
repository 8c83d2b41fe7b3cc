# Sourced by many-writers.sh and first-backups.sh: the hosts' trees, and
# the seeded repositories they are backed up into.
# host_trees N MIB SHARED_MIB makes $WORK/trees/host1..N, each MIB MiB of
# random bytes in files of TREE_FILE_MIB (4) MiB (the last of a directory smaller):
# SHARED_MIB of it the same files on every host (shared/), the rest its
# own (own/); and $WORK/seed, 1 MiB for a repository's first backup. The
# trees are read once so that every backup finds them in the page cache.

TREE_FILE_MIB=4

mkfiles() { # DIR MIB: MIB of random bytes in files of TREE_FILE_MIB
    local i=0 left=$2 n
    mkdir -p "$1"
    while [ "$left" -gt 0 ]; do
        n=$((left < TREE_FILE_MIB ? left : TREE_FILE_MIB))
        head -c $((n << 20)) /dev/urandom >"$1/f$i"
        i=$((i + 1)) left=$((left - n))
    done
}

host_trees() { # N MIB SHARED_MIB
    local k
    mkfiles "$WORK/base" "$3"
    for k in $(seq 1 "$1"); do
        mkdir -p "$WORK/trees/host$k"
        cp -r "$WORK/base" "$WORK/trees/host$k/shared"
        mkfiles "$WORK/trees/host$k/own" $(($2 - $3))
    done
    rm -rf "$WORK/base" && mkfiles "$WORK/seed" 1
    cat "$WORK"/trees/*/*/* >/dev/null
}

seeded() { # CAIRN REPO: a fresh repository and its backup of $WORK/seed
    # (a repository's first backup runs alone and writes the index file)
    "$1" --repo "$2" init -q
    "$1" --repo "$2" --cache-dir "$WORK/cache/seed" backup -q --host seed "$WORK/seed"
}
