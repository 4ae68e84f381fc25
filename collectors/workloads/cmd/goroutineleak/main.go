// Command goroutineleak reproduces the classic goroutine leak: each request
// starts a worker that sends its result on an unbuffered channel, but the
// caller gives up after a short timeout and never receives, so every slow
// worker stays blocked on the channel send forever. Fast requests finish
// normally, so only the timed-out ones pile up.
package main

import (
	"flag"
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

// handle asks a worker for a result and waits at most timeout for it.
func handle(id int, work time.Duration, timeout time.Duration) (int, bool) {
	result := make(chan int) // unbuffered: the send blocks until someone receives
	go func() {
		if work > 0 {
			time.Sleep(work)
		}
		result <- spin(1000) + id // blocks forever once the caller has gone
	}()
	select {
	case v := <-result:
		return v, true
	case <-time.After(timeout):
		return 0, false
	}
}

func main() {
	requests := flag.Int("requests", 240, "requests to serve")
	run := wl.Start(300*time.Millisecond, false)
	defer run.Stop()

	served, leaked := 0, 0
	for i := 0; i < *requests && !run.Done(); i++ {
		// Every other request is slow: its worker outlives the caller's timeout.
		var work time.Duration
		if i%2 == 1 {
			work = 3 * time.Millisecond
		}
		if _, ok := handle(i, work, time.Millisecond); ok {
			served++
		} else {
			leaked++
		}
	}
	_, _ = served, leaked
	// Stop tracing with the leaked workers still blocked, as a long-running
	// service would look when traced.
	time.Sleep(20 * time.Millisecond)
	run.Stop()
}
