// Command healthy is the diagnostics' control: a small, well-behaved
// service. A producer hands short jobs to a worker pool over a channel, a
// client and an echo server talk over loopback TCP at a steady pace (short,
// non-blocking socket syscalls). Nothing blocks for long, nothing leaks,
// every connection and goroutine ends, allocation stays low (no GC cycles
// expected): `gmpscope diagnose` must find nothing here. No file I/O: on a
// busy machine a plain openat(2) can block for tens of ms, which is exactly
// what the syscall rules report.
package main

import (
	"io"
	"net"
	"sync"
	"time"

	"gmpscope/workloads/internal/wl"
)

func spin(n int) int {
	x := 1
	for i := 0; i < n; i++ {
		x = x*1103515245 + 12345
	}
	return x
}

func main() {
	run := wl.Start(300*time.Millisecond, false)
	defer run.Stop()

	var wg sync.WaitGroup

	// Worker pool: a few short jobs every millisecond.
	jobs := make(chan int, 16)
	results := make(chan int, 16)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				results <- spin(2000 + j%100)
			}
		}()
	}
	var sum int
	done := make(chan struct{})
	go func() {
		for r := range results {
			sum += r
		}
		close(done)
	}()

	// Loopback echo at a steady pace; the connection is closed at the end.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		wl.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			wl.Fatal(err)
		}
		msg, buf := []byte("ping"), make([]byte, 4)
		for !run.Done() {
			c.Write(msg)
			if _, err := io.ReadFull(c, buf); err != nil {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		c.Close()
	}()

	tick := time.NewTicker(time.Millisecond)
	for i := 0; !run.Done(); i++ {
		<-tick.C
		for k := 0; k < 4; k++ {
			jobs <- i*4 + k
		}
	}
	tick.Stop()
	close(jobs)
	ln.Close()
	wg.Wait()
	// wg covers the pool, so results has no more senders.
	close(results)
	<-done
	_ = sum
}
