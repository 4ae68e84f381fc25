// Command syscallblock reproduces goroutines starved by blocking system
// calls under GOMAXPROCS(1): readers sit in read(2) on a blocking pipe
// (fed slowly by a writer), and others fsync and read a file, while
// CPU-bound goroutines stay runnable and wait for the only P.
package main

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"gmpscope/workloads/internal/wl"
)

func main() {
	runtime.GOMAXPROCS(1)
	run := wl.Start(300*time.Millisecond, false)
	defer run.Stop()

	// syscall.Pipe gives blocking descriptors, so a read waits in the
	// kernel instead of in the network poller.
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		wl.Fatal(err)
	}
	rfd, wfd := fds[0], fds[1]

	var wg sync.WaitGroup
	const readers = 3
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1)
			for {
				n, err := syscall.Read(rfd, buf)
				if err == syscall.EINTR {
					continue
				}
				if err != nil || n == 0 || buf[0] == 'q' {
					return
				}
			}
		}()
	}

	// The writer feeds the pipe slowly: each byte releases one reader.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !run.Done() {
			time.Sleep(5 * time.Millisecond)
			syscall.Write(wfd, []byte{'x'})
		}
		for i := 0; i < readers; i++ {
			syscall.Write(wfd, []byte{'q'})
		}
	}()

	dir, err := os.MkdirTemp("", "syscallblock")
	if err != nil {
		wl.Fatal(err)
	}
	defer os.RemoveAll(dir)
	wg.Add(1)
	go func() {
		defer wg.Done()
		path := filepath.Join(dir, "data")
		chunk := make([]byte, 64<<10)
		for !run.Done() {
			f, err := os.Create(path)
			if err != nil {
				wl.Fatal(err)
			}
			f.Write(chunk)
			f.Sync()
			f.Close()
			if _, err := os.ReadFile(path); err != nil {
				wl.Fatal(err)
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()

	// CPU-bound goroutines that would like to run while the others are
	// in system calls; with one P they queue behind each other.
	var sink uint64
	var sinkMu sync.Mutex
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			x := seed
			for !run.Done() {
				// A fixed time on the P, not a fixed amount of work: the
				// others' wait for it must not shrink on a faster CPU.
				until := time.Now().Add(2 * time.Millisecond)
				for time.Now().Before(until) {
					for j := 0; j < 1000; j++ {
						x = x*6364136223846793005 + 1442695040888963407
					}
				}
				runtime.Gosched()
			}
			sinkMu.Lock()
			sink += x
			sinkMu.Unlock()
		}(uint64(i + 1))
	}
	wg.Wait()
	syscall.Close(rfd)
	syscall.Close(wfd)
	_ = sink
}
