// Command latency-proxy is a TCP proxy that adds a round trip of latency to
// every HTTP request, for the S3 benchmarks (bench/s3-proxy.sh builds it).
//
// Usage: latency-proxy LISTEN_PORT TARGET_HOST:TARGET_PORT DELAY_MS [STATS_FILE]
//
// It models a network between an S3 client and server. On each connection,
// whenever the server starts answering after the client has sent something
// (a request and its body), the answer is held back for DELAY_MS: one extra
// round trip per request, however large the request, which is what a link
// with that round-trip time costs a request/response protocol with
// connections kept alive. Bytes are forwarded unchanged. It prints "ready"
// once listening and runs until killed. With STATS_FILE it keeps
// "requests bytes_up bytes_down" (answers held back, bytes client to server,
// bytes server to client) in it, rewritten twice a second. With the
// environment variable PROXY_REQUEST_LOG naming a file, it appends the
// request line ("GET /bucket/key?query HTTP/1.1") of every request to it,
// followed by the milliseconds since the proxy started and the number of
// the connection it came on (one process's requests: its connections).
// With PROXY_TIMING naming a file, it keeps "requests seconds" in it: the
// time from each request's first byte to its answer's first byte, summed
// (the server's time and the upload of the request's body, without the
// added delay).
//
// It replaces a Python asyncio proxy that did the same: on the benchmarks'
// 2 CPUs that one spent more CPU per backup than the S3 server (75 ms
// against 57 ms for an incremental backup of about 48 requests), CPU that a
// real network does not take from the machine running the backups.
package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

var (
	requests, up, down atomic.Int64
	// Nanoseconds from requests' first bytes to their answers' first bytes.
	answerNs   atomic.Int64
	logMu      sync.Mutex
	requestLog *os.File
	started    = time.Now()
	conns      atomic.Int64
)

func main() {
	if len(os.Args) != 4 && len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: latency-proxy LISTEN_PORT TARGET_HOST:TARGET_PORT DELAY_MS [STATS_FILE]")
		os.Exit(2)
	}
	target := os.Args[2]
	ms, err := strconv.ParseFloat(os.Args[3], 64)
	if err != nil || ms < 0 {
		fmt.Fprintln(os.Stderr, "latency-proxy: DELAY_MS must be a number of milliseconds")
		os.Exit(2)
	}
	delay := time.Duration(ms * float64(time.Millisecond))
	if path := os.Getenv("PROXY_REQUEST_LOG"); path != "" {
		requestLog, err = os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "latency-proxy:", err)
			os.Exit(1)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency-proxy:", err)
		os.Exit(1)
	}
	if len(os.Args) == 5 {
		go writeStats(os.Args[4])
	}
	if path := os.Getenv("PROXY_TIMING"); path != "" {
		go writeTiming(path)
	}
	fmt.Println("ready")
	for {
		client, err := ln.Accept()
		if err != nil {
			continue
		}
		go handle(client, target, delay)
	}
}

func handle(client net.Conn, target string, delay time.Duration) {
	server, err := net.Dial("tcp", target)
	if err != nil {
		client.Close()
		return
	}
	conn := conns.Add(1)
	// True once the client sent bytes the server has not answered yet.
	var awaiting atomic.Bool
	// When the request being answered began (Unix nanoseconds).
	var sent atomic.Int64
	done := make(chan struct{}, 2)
	go func() {
		pipe(client, server, func(data []byte) {
			up.Add(int64(len(data)))
			if !awaiting.Load() && requestLog != nil {
				line, _, _ := bytes.Cut(data, []byte("\r\n"))
				ms := float64(time.Since(started).Microseconds()) / 1000
				logMu.Lock()
				fmt.Fprintf(requestLog, "%s %.3f %d\n", line, ms, conn)
				logMu.Unlock()
			}
			if !awaiting.Load() {
				sent.Store(time.Now().UnixNano())
			}
			awaiting.Store(true)
		})
		done <- struct{}{}
	}()
	go func() {
		pipe(server, client, func(data []byte) {
			down.Add(int64(len(data)))
			if awaiting.Swap(false) {
				requests.Add(1)
				answerNs.Add(time.Now().UnixNano() - sent.Load())
				time.Sleep(delay)
			}
		})
		done <- struct{}{}
	}()
	// Either side closing ends the connection on both.
	<-done
	client.Close()
	server.Close()
	<-done
}

// pipe copies from r to w, calling onData with each read before writing it.
func pipe(r, w net.Conn, onData func([]byte)) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			onData(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func writeStats(path string) {
	for {
		tmp := path + ".tmp"
		line := fmt.Sprintf("%d %d %d\n", requests.Load(), up.Load(), down.Load())
		if os.WriteFile(tmp, []byte(line), 0o644) == nil {
			os.Rename(tmp, path)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func writeTiming(path string) {
	for {
		tmp := path + ".tmp"
		line := fmt.Sprintf("%d %.3f\n", requests.Load(), float64(answerNs.Load())/1e9)
		if os.WriteFile(tmp, []byte(line), 0o644) == nil {
			os.Rename(tmp, path)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
