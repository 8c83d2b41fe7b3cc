# Sourced by the S3 benchmarks (through s3-proxy.sh, and many-writers.sh for
# Garage): builds bench/latency-proxy (Go, standard library only) into
# $TOOLS_DIR/bin when its source is newer, and defines
# `latency_proxy LISTEN_PORT TARGET STATS_FILE LOG`, which starts it in the
# background holding every answer back for $DELAY_MS (its PID in $!).
PROXY_BIN="$TOOLS_DIR/bin/latency-proxy"
if [ ! -x "$PROXY_BIN" ] || [ bench/latency-proxy/main.go -nt "$PROXY_BIN" ]; then
    mkdir -p "$TOOLS_DIR/bin"
    PROXY_BIN=$(realpath "$PROXY_BIN" 2>/dev/null || realpath -m "$PROXY_BIN")
    (cd bench/latency-proxy && go build -o "$PROXY_BIN" .)
fi
# The proxy stands in for a network, which takes no CPU from the machine
# under test; it runs on one OS thread (GOMAXPROCS=1, unless the
# environment sets it): with the Go scheduler on both shared cores it took
# about a fifth more CPU per request (bench/README.md, "The proxy on one
# thread").
latency_proxy() { GOMAXPROCS=${GOMAXPROCS:-1} "$PROXY_BIN" "$1" "$2" "$DELAY_MS" "$3" >"$4" 2>&1 & }
