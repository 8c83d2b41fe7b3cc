# Sourced by the S3 benchmarks (s3-latency.sh, s3-fragmented.sh): starts
# VersityGW (the S3 server the tests build) on 127.0.0.1 with a bucket
# `bench` under $WORK/store, behind bench/latency-proxy (built here with Go)
# holding every answer back for $DELAY_MS, and defines the helpers the
# reports use.
# Needs WORK, DELAY_MS, TOOLS_DIR; sets ENDPOINT, STATS, PIDS.

VERSITYGW_VERSION=v1.8.0 # as crates/cairn-backend/src/s3/test_server.rs
export AWS_ACCESS_KEY_ID=cairn-bench AWS_SECRET_ACCESS_KEY=cairn-bench-secret
GW="$TOOLS_DIR/bin/versitygw"
if [ ! -x "$GW" ]; then
    mkdir -p "$TOOLS_DIR/bin"
    GOBIN="$(cd "$TOOLS_DIR/bin" && pwd)" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi
. bench/latency-proxy.sh
mkdir -p "$WORK/store/bench"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
GW_PORT=$(free_port)
"$GW" --port "127.0.0.1:$GW_PORT" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
    posix "$WORK/store" >"$WORK/versitygw.log" 2>&1 &
PIDS+=($!)
PROXY_PORT=$(free_port)
STATS="$WORK/proxy-stats"
latency_proxy "$PROXY_PORT" "127.0.0.1:$GW_PORT" "$STATS" "$WORK/proxy.log"
PIDS+=($!)
for _ in $(seq 100); do
    grep -q ready "$WORK/proxy.log" 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$GW_PORT") 2>/dev/null && break
    sleep 0.1
done
ENDPOINT="http://127.0.0.1:$PROXY_PORT"

# "requests bytes_up bytes_down" through the proxy so far.
stats() { sleep 0.6; cat "$STATS"; }
# Seconds a command takes (its output dropped).
timed() { local t0=$EPOCHREALTIME; "$@" >/dev/null; awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }
