module cairn.local/latency-proxy

go 1.21
