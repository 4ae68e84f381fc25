// Command connleak reproduces leaked connections: a server accepts and
// starts a reader goroutine per connection, clients dial and never close,
// so goroutines pile up parked in the network poller and the number of
// open descriptors keeps climbing (logged to the trace as "fds").
package main

import (
	"context"
	"flag"
	"net"
	"os"
	"runtime/trace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gmpscope/workloads/internal/wl"
)

func openFDs() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries)
}

func main() {
	maxConns := flag.Int("max-conns", 300, "stop dialing after this many connections (each costs two descriptors)")
	run := wl.Start(300*time.Millisecond, false)
	defer run.Stop()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		wl.Fatal(err)
	}
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			// The handler waits for a request that never comes, and
			// nobody ever closes the connection.
			go func(c net.Conn) {
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}(c)
		}
	}()

	ctx := context.Background()
	var leaked []net.Conn
	var mu sync.Mutex
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for !run.Done() && len(leaked) < *maxConns {
		<-tick.C
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			trace.Log(ctx, "dial-error", err.Error())
			continue
		}
		c.Write([]byte("hello"))
		// The client side leaks a reader goroutine too.
		go func(c net.Conn) {
			buf := make([]byte, 512)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}(c)
		mu.Lock()
		leaked = append(leaked, c)
		mu.Unlock()
		if time.Since(last) > 20*time.Millisecond {
			last = time.Now()
			trace.Log(ctx, "fds", strconv.Itoa(openFDs()))
		}
	}
	// A dial returns once the kernel has queued the connection: wait for the
	// server to take every one, or closing the listener drops the rest.
	for deadline := time.Now().Add(5 * time.Second); accepted.Load() < int64(len(leaked)) &&
		time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	trace.Log(ctx, "fds", strconv.Itoa(openFDs()))
	// Stop tracing with everything still parked, as a leaking service
	// would look when a trace is taken.
	run.Stop()
	for _, c := range leaked {
		c.Close()
	}
	ln.Close()
}
