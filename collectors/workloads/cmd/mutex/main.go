// Command mutex reproduces lock contention: goroutines fighting over a
// sync.Mutex, readers and writers on a sync.RWMutex, and a producer and
// consumers coordinating through a sync.Cond.
package main

import (
	"runtime"
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

	// A hot mutex held for a while by each of many goroutines.
	var mu sync.Mutex
	counter := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !run.Done() && n < 150; n++ {
				mu.Lock()
				counter += spin(20000)
				mu.Unlock()
				spin(2000)
			}
		}()
	}

	// A read-mostly map guarded by an RWMutex, with a writer that holds
	// the write lock long enough to block all readers.
	var rw sync.RWMutex
	table := map[int]int{}
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			for n := 0; !run.Done() && n < 500; n++ {
				rw.RLock()
				_ = table[n%64]
				spin(300)
				rw.RUnlock()
				if n%50 == 0 {
					runtime.Gosched()
				}
			}
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; !run.Done() && n < 100; n++ {
			rw.Lock()
			table[n%64] = spin(50000)
			rw.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()

	// A bounded queue built on sync.Cond: consumers wait for items,
	// the producer waits for room.
	var qmu sync.Mutex
	notEmpty := sync.NewCond(&qmu)
	notFull := sync.NewCond(&qmu)
	var queue []int
	closed := false
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				qmu.Lock()
				for len(queue) == 0 && !closed {
					notEmpty.Wait()
				}
				if len(queue) == 0 && closed {
					qmu.Unlock()
					return
				}
				item := queue[0]
				queue = queue[1:]
				notFull.Signal()
				qmu.Unlock()
				spin(item)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; !run.Done() && n < 2000; n++ {
			qmu.Lock()
			for len(queue) >= 4 {
				notFull.Wait()
			}
			queue = append(queue, 1000+n%7*100)
			notEmpty.Signal()
			qmu.Unlock()
		}
		qmu.Lock()
		closed = true
		notEmpty.Broadcast()
		qmu.Unlock()
	}()

	wg.Wait()
	_ = counter
}
