// Command schedlatency reproduces scheduler latency: more CPU-bound
// goroutines than Ps (GOMAXPROCS(2), 8 spinning goroutines that never block
// or yield), so each one is preempted every ~10 ms and then sits Runnable
// while the others use the Ps. Runs 500 ms by default.
package main

import (
	"flag"
	"runtime"
	"sync"
	"time"

	"gmpscope/workloads/internal/wl"
)

func main() {
	spinners := flag.Int("spinners", 8, "CPU-bound goroutines")
	procs := flag.Int("procs", 2, "GOMAXPROCS")
	runtime.GOMAXPROCS(*procs)
	run := wl.Start(500*time.Millisecond, false)
	defer run.Stop()

	var wg sync.WaitGroup
	sinks := make([]uint64, *spinners)
	for i := 0; i < *spinners; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			x := uint64(i + 1)
			for !run.Done() {
				// No function calls, no allocation, no channel: only
				// asynchronous preemption takes the P away.
				for j := 0; j < 100000; j++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			sinks[i] = x
		}(i)
	}
	wg.Wait()
}
