// Command chain makes a known chain of wake-ups for the critical path: in
// each round a consumer waits on a channel that a feeder sends on, and the
// feeder first waits for a sync.Mutex that a holder keeps while it sleeps
// and then works for known times. The consumer's wait is therefore the
// holder's sleep and work: consumer <- feeder <- holder.
package main

import (
	"context"
	"runtime/trace"
	"strconv"
	"sync"
	"time"

	"gmpscope/workloads/internal/wl"
)

// rounds of the chain, one after the other; round i sleeps sleepBase*(i+1)
// inside the lock, then works workFor.
const (
	rounds    = 3
	sleepBase = 10 * time.Millisecond
	workFor   = 3 * time.Millisecond
)

// busy keeps the goroutine running (not blocked) for d of wall time.
func busy(d time.Duration) int {
	start := time.Now()
	x := 1
	for time.Since(start) < d {
		for i := 0; i < 1000; i++ {
			x = x*1103515245 + 12345
		}
	}
	return x
}

// holder takes the lock, tells the feeder it holds it, sleeps, works, unlocks.
func holder(mu *sync.Mutex, locked chan<- struct{}, sleep time.Duration, sink *int) {
	mu.Lock()
	locked <- struct{}{}
	time.Sleep(sleep)
	*sink = busy(workFor)
	mu.Unlock()
}

// feeder waits until the holder has the lock, waits for the lock, then sends.
func feeder(mu *sync.Mutex, locked <-chan struct{}, out chan<- int, round int) {
	<-locked
	mu.Lock()
	mu.Unlock()
	out <- round
}

// consumer waits for the feeder's value inside a task named "request".
func consumer(out <-chan int, done *sync.WaitGroup) {
	defer done.Done()
	_, task := trace.NewTask(context.Background(), "request")
	v := <-out
	trace.Log(context.Background(), "round", strconv.Itoa(v))
	task.End()
}

func main() {
	run := wl.Start(300*time.Millisecond, false)
	defer run.Stop()

	sink := 0
	for i := 0; i < rounds; i++ {
		var mu sync.Mutex
		locked := make(chan struct{})
		out := make(chan int)
		var done sync.WaitGroup
		done.Add(1)
		// The consumer last: the goroutines it waits on exist before its
		// wait begins, so its path holds no creation by main (created first,
		// a feeder could be made after the consumer had started waiting).
		go holder(&mu, locked, sleepBase*time.Duration(i+1), &sink)
		go feeder(&mu, locked, out, i)
		go consumer(out, &done)
		done.Wait()
	}
	_ = sink
}
