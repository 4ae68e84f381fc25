// Command gcpressure reproduces allocation pressure: goroutines allocate
// quickly while keeping a sizeable live heap, with a low GOGC, so the
// collector runs often and allocating goroutines are drafted into mark
// assists. The CPU profiler runs by default so the trace has CPU samples.
package main

import (
	"flag"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"gmpscope/workloads/internal/wl"
)

type node struct {
	next *node
	data []byte
	vals [8]int
}

func main() {
	debug.SetGCPercent(20)
	total := flag.Int("allocs", 48000, "allocations in total (bounds the number of collections)")
	// Leaving a P idle keeps the background sweeper from yielding after
	// every span, which would flood the trace with Gosched transitions.
	workers := flag.Int("workers", (runtime.GOMAXPROCS(0)+1)/2, "allocating goroutines")
	run := wl.Start(300*time.Millisecond, true)
	defer run.Stop()

	perWorker := *total / *workers
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			// A ring of retained objects keeps the live heap large
			// enough for marking to take real work.
			ring := make([]*node, 4096)
			var head *node
			for i := 0; !run.Done() && i < perWorker; i++ {
				n := &node{data: make([]byte, 64+(i*(w+3))%2048)}
				n.vals[i%8] = i
				if i%16 == 0 {
					n.next = head
					head = n
					if i%(16*64) == 0 {
						head = nil
					}
				}
				ring[i%len(ring)] = n
				if i%100000 == 0 {
					runtime.Gosched()
				}
			}
			_ = head
		}(w)
	}
	// One explicit collection, as a program calling runtime.GC would.
	time.Sleep(run.Duration / 2)
	runtime.GC()
	wg.Wait()
}
