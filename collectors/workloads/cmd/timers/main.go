// Command timers exercises the timer machinery: time.Sleep of several
// lengths, tickers, time.After in a select, time.AfterFunc and context
// deadlines. It runs long enough by default (1.5s) for Go 1.22+ to write
// more than one trace generation.
package main

import (
	"context"
	"sync"
	"time"

	"gmpscope/workloads/internal/wl"
)

func main() {
	run := wl.Start(1500*time.Millisecond, false)
	defer run.Stop()

	var wg sync.WaitGroup

	// Sleepers with different periods.
	for i, d := range []time.Duration{50 * time.Microsecond, time.Millisecond, 7 * time.Millisecond, 40 * time.Millisecond} {
		wg.Add(1)
		go func(i int, d time.Duration) {
			defer wg.Done()
			for !run.Done() {
				time.Sleep(d)
			}
		}(i, d)
	}

	// A ticker driving periodic work, stopped at the end.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(3 * time.Millisecond)
		defer t.Stop()
		for !run.Done() {
			<-t.C
		}
	}()

	// select with time.After as a timeout against a channel that is
	// only sometimes ready.
	work := make(chan int)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; !run.Done(); n++ {
			select {
			case <-work:
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !run.Done() {
			time.Sleep(5 * time.Millisecond)
			select {
			case work <- 1:
			default:
			}
		}
	}()

	// Contexts that time out while their users wait on them.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !run.Done() {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Millisecond)
			<-ctx.Done()
			cancel()
		}
	}()

	// AfterFunc callbacks run on their own goroutines.
	var fired sync.WaitGroup
	for !run.Done() {
		fired.Add(1)
		time.AfterFunc(time.Millisecond, fired.Done)
		time.Sleep(10 * time.Millisecond)
	}
	fired.Wait()
	wg.Wait()
}
