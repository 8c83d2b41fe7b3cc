# Sourced by bench/garage-cluster.sh and bench/many-writers.sh: installs
# Garage $GARAGE_VERSION from crates.io into $TOOLS_DIR if GARAGE is not a
# binary (a long build, once), and starts a 3-node cluster on 127.0.0.1
# under $WORK/n1..n3 (replication_factor 3, "consistent" mode) with a
# bucket `cairn` and a key for it.
# Needs WORK, TOOLS_DIR; sets GARAGE, S3[n] (node n's S3 port), PID[n],
# GARAGE_KEY_ID, GARAGE_SECRET; defines g (the garage CLI against node n),
# start/stop N (stop is kill -9), wait_healthy, garage_cleanup (call it on
# exit).

GARAGE_VERSION=2.1.0
GARAGE=${GARAGE:-$TOOLS_DIR/bin/garage}
if [ ! -x "$GARAGE" ]; then
    echo "== installing garage $GARAGE_VERSION from crates.io (a long build)"
    cargo install --locked garage --version "$GARAGE_VERSION" --root "$TOOLS_DIR"
fi
GARAGE=$(realpath "$GARAGE")

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
declare -a RPC S3 ADMIN PID
for n in 1 2 3; do
    RPC[$n]=$(free_port)
    S3[$n]=$(free_port)
    ADMIN[$n]=$(free_port)
    mkdir -p "$WORK/n$n/meta" "$WORK/n$n/data"
    cat >"$WORK/n$n.toml" <<EOF
metadata_dir = "$WORK/n$n/meta"
data_dir = "$WORK/n$n/data"
db_engine = "sqlite"
replication_factor = 3
consistency_mode = "consistent"
rpc_secret = "$SECRET"
rpc_bind_addr = "127.0.0.1:${RPC[$n]}"
rpc_public_addr = "127.0.0.1:${RPC[$n]}"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:${S3[$n]}"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:${ADMIN[$n]}"
EOF
done

garage_cleanup() {
    for n in 1 2 3; do
        [ -n "${PID[$n]:-}" ] && kill "${PID[$n]}" 2>/dev/null || true
    done
}

g() { local n=$1; shift; "$GARAGE" -c "$WORK/n$n.toml" "$@"; }
start() {
    local n=$1
    "$GARAGE" -c "$WORK/n$n.toml" server >>"$WORK/n$n.log" 2>&1 &
    PID[$n]=$!
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/${S3[$n]}") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "garage node $n did not start: $WORK/n$n.log" >&2
    exit 1
}
# Waits until node 2 sees all three nodes connected (a restarted node
# reconnects to its known peers on its own; asked to, if it is slow).
wait_healthy() {
    for i in $(seq 300); do
        local st
        st=$(g 2 status 2>/dev/null || true)
        if echo "$st" | grep -q "HEALTHY NODES" && ! echo "$st" | grep -q "FAILED NODES" \
            && [ "$(echo "$st" | grep -c '127.0.0.1')" -ge 3 ]; then
            return 0
        fi
        if [ "$i" = 100 ]; then
            for n in 1 3; do g 2 node connect "$(g $n node id -q)" >/dev/null 2>&1 || true; done
        fi
        sleep 0.2
    done
    echo "the cluster did not become healthy again" >&2
    g 2 status >&2
    exit 1
}
stop() { kill -9 "${PID[$1]}" 2>/dev/null || true; wait "${PID[$1]}" 2>/dev/null || true; PID[$1]=; }

for n in 1 2 3; do start $n; done
for n in 2 3; do g 1 node connect "$(g $n node id -q)" >/dev/null; done
for n in 1 2 3; do
    id=$(g $n node id -q)
    g 1 layout assign -z "zone$n" -c 1G "${id%@*}" >/dev/null
done
g 1 layout apply --version 1 >/dev/null
# Wait until every node knows the layout and sees the others.
for _ in $(seq 100); do
    [ "$(g 1 status 2>/dev/null | grep -c '127.0.0.1')" -ge 3 ] && break
    sleep 0.2
done

g 1 bucket create cairn >/dev/null
keyinfo=$(g 1 key create cairn-key)
GARAGE_KEY_ID=$(echo "$keyinfo" | awk '/Key ID/ { print $NF; exit }')
GARAGE_SECRET=$(echo "$keyinfo" | awk '/Secret key/ { print $NF; exit }')
g 1 bucket allow --read --write --owner cairn --key cairn-key >/dev/null

