//go:build go1.25

// Command flightrec is a service that keeps Go 1.25's flight recorder
// (runtime/trace.FlightRecorder) running and writes its snapshot the moment a
// request is slow, the way the flight recorder is meant to be used: no trace
// is written until something goes wrong, and then the last moments before it
// are.
//
// An HTTP server on loopback serves a small cache under a sync.Mutex; -clients
// clients send about -rps requests per second in all, each request a trace
// task. Every -rebuild-every a rebuild sorts a copy of the cache while holding
// the lock, and the cache doubles each time, so the rebuilds grow from well
// under a millisecond to tens of milliseconds: the requests that arrive during
// a long one wait on the mutex. The first request slower than -threshold (seen
// by its client) logs "slow request" to the trace and writes the flight
// recorder's window (-min-age, at most -max-bytes) to -snapshot, then the
// program stops. It also stops, without a snapshot and with status 1, after
// -max-rebuilds rebuilds.
//
// Built only by Go 1.25 and later (the flight recorder's first release).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/trace"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type cache struct {
	mu    sync.Mutex
	items []int
}

func (c *cache) get(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.items) == 0 {
		return 0
	}
	return c.items[i%len(c.items)]
}

// rebuild doubles the cache and sorts it, all under the lock (the defect the
// snapshot catches: work proportional to the cache's size while holding the
// lock every request needs).
func (c *cache) rebuild(ctx context.Context, seed int) int {
	defer trace.StartRegion(ctx, "cache rebuild").End()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 2 * len(c.items)
	if n == 0 {
		n = 1 << 12
	}
	next := make([]int, n)
	x := uint32(seed) | 1
	for i := range next {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		next[i] = int(x)
	}
	sort.Ints(next)
	c.items = next
	return n
}

func main() {
	snapshot := flag.String("snapshot", "", "write the flight recorder's snapshot to this file")
	clients := flag.Int("clients", 4, "concurrent clients")
	rps := flag.Int("rps", 200, "requests per second, all clients together")
	threshold := flag.Duration("threshold", 20*time.Millisecond, "a request slower than this triggers the snapshot")
	rebuildEvery := flag.Duration("rebuild-every", 500*time.Millisecond, "time between cache rebuilds")
	maxRebuilds := flag.Int("max-rebuilds", 14, "give up (exit 1) after this many rebuilds")
	minAge := flag.Duration("min-age", time.Second, "the flight recorder's window (FlightRecorderConfig.MinAge)")
	maxBytes := flag.Uint64("max-bytes", 4<<20, "the flight recorder's size bound (FlightRecorderConfig.MaxBytes)")
	flag.Parse()
	if *snapshot == "" {
		fmt.Fprintln(os.Stderr, "flightrec: -snapshot FILE is required")
		os.Exit(2)
	}

	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: *minAge, MaxBytes: *maxBytes})
	if err := fr.Start(); err != nil {
		fatal(err)
	}
	defer fr.Stop()

	c := &cache{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/item", func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		fmt.Fprintf(w, "%d\n", c.get(i))
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()

	done := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { close(done) }) }
	var snapped int32
	var slowest int64

	go func() {
		ctx := context.Background()
		tick := time.NewTicker(*rebuildEvery)
		defer tick.Stop()
		for r := 1; ; r++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if r > *maxRebuilds {
				finish()
				return
			}
			n := c.rebuild(ctx, r)
			trace.Log(ctx, "cache", fmt.Sprintf("rebuilt %d items", n))
		}
	}()

	per := time.Duration(int64(time.Second) * int64(*clients) / int64(*rps))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients}, Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for id := 0; id < *clients; id++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			tick := time.NewTicker(per)
			defer tick.Stop()
			for n := id; ; n += *clients {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				ctx, task := trace.NewTask(context.Background(), "request")
				start := time.Now()
				resp, err := client.Get(base + "/item?i=" + strconv.Itoa(n))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				took := time.Since(start)
				task.End()
				if took > time.Duration(atomic.LoadInt64(&slowest)) {
					atomic.StoreInt64(&slowest, int64(took))
				}
				if took > *threshold && atomic.CompareAndSwapInt32(&snapped, 0, 1) {
					trace.Log(ctx, "slow request", fmt.Sprintf("%.1f ms > %v: flight recorder snapshot", float64(took)/1e6, *threshold))
					writeSnapshot(fr, *snapshot, took)
					finish()
					return
				}
			}
		}(id)
	}
	wg.Wait()
	client.CloseIdleConnections()
	srv.Close()
	if atomic.LoadInt32(&snapped) == 0 {
		fmt.Fprintf(os.Stderr, "flightrec: no request slower than %v after %d rebuilds (slowest %v): no snapshot\n",
			*threshold, *maxRebuilds, time.Duration(atomic.LoadInt64(&slowest)))
		os.Exit(1)
	}
}

func writeSnapshot(fr *trace.FlightRecorder, path string, took time.Duration) {
	f, err := os.Create(path)
	if err != nil {
		fatal(err)
	}
	n, err := fr.WriteTo(f)
	if err != nil {
		fatal(err)
	}
	if err := f.Close(); err != nil {
		fatal(err)
	}
	fmt.Printf("flightrec: a %v request: wrote %d bytes of flight recorder snapshot to %s\n", took.Round(time.Microsecond), n, path)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "flightrec:", err)
	os.Exit(1)
}
