// Command busyservice is a busy HTTP service on loopback, the kind of
// program whose production traces run to hundreds of megabytes: many
// concurrent clients (on keep-alive connections and on a new connection per
// request) call a server whose handlers allocate, contend on a hot mutex,
// wait on timers and do small file I/O (write, fsync, read) in a temporary
// directory, each request wrapped in runtime/trace tasks and regions with
// logs. Background goroutines tick, retain a churning heap and fire
// time.AfterFunc callbacks. On a 2-core machine it writes roughly 10 MB of
// trace per second of -duration; every loop ends at the deadline.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gmpscope/workloads/internal/wl"
)

// hot is the service's shared state: every /api request takes its lock.
type hot struct {
	mu     sync.Mutex
	counts map[string]int
	recent [][]byte
}

func (h *hot) record(key string, blob []byte) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[key]++
	// A short critical section that still does some work while held.
	sum := 0
	for _, b := range blob[:len(blob)/4] {
		sum += int(b)
	}
	if len(h.recent) >= 256 {
		h.recent = h.recent[1:]
	}
	h.recent = append(h.recent, blob)
	return sum + h.counts[key]
}

// files is a small pool of scratch files, each guarded by its own lock.
type files struct {
	dir   string
	locks [16]sync.Mutex
}

func (f *files) roundTrip(ctx context.Context, n int, data []byte) (int, error) {
	i := n % len(f.locks)
	defer trace.StartRegion(ctx, "file io").End()
	f.locks[i].Lock()
	defer f.locks[i].Unlock()
	name := filepath.Join(f.dir, "scratch-"+strconv.Itoa(i))
	fh, err := os.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	if _, err := fh.Write(data); err != nil {
		return 0, err
	}
	if err := fh.Sync(); err != nil {
		return 0, err
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	got, err := io.ReadAll(fh)
	return len(got), err
}

// work allocates like a request decoding and building its answer does.
func work(ctx context.Context, rng *rand.Rand, size int) []byte {
	defer trace.StartRegion(ctx, "decode").End()
	fields := make(map[string][]byte, 8)
	for i := 0; i < 8; i++ {
		r := trace.StartRegion(ctx, "field")
		b := make([]byte, size/8+rng.Intn(64))
		rng.Read(b)
		fields["f"+strconv.Itoa(i)] = b
		r.End()
	}
	trace.Logf(ctx, "decoded", "%d fields, %d bytes", len(fields), size)
	out := make([]byte, 0, size)
	for i := 0; i < 8; i++ {
		out = append(out, fields["f"+strconv.Itoa(i)]...)
	}
	return out
}

func main() {
	clients := flag.Int("clients", 48, "concurrent client goroutines")
	freshEvery := flag.Int("fresh-every", 4, "one client in N dials a new connection per request")
	fileEvery := flag.Int("file-every", 16, "one request in N does file I/O (write, fsync, read)")
	run := wl.Start(2*time.Second, false)
	defer run.Stop()

	dir, err := os.MkdirTemp("", "busyservice-")
	if err != nil {
		wl.Fatal(err)
	}
	defer os.RemoveAll(dir)
	state := &hot{counts: map[string]int{}}
	scratch := &files{dir: dir}
	var seq int64

	// Sessions are read by every request and written now and then.
	var sessMu sync.RWMutex
	sessions := map[int64]string{}
	// An audit log written by a small pool of workers fed over a channel.
	audit := make(chan string, 64)
	auditStop := make(chan struct{})
	var awg sync.WaitGroup
	for i := 0; i < 4; i++ {
		awg.Add(1)
		go func() {
			defer awg.Done()
			for {
				select {
				case line := <-audit:
					trace.Log(context.Background(), "audit", line)
				case <-auditStop:
					return
				}
			}
		}()
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		n := atomic.AddInt64(&seq, 1)
		ctx, task := trace.NewTask(r.Context(), "handle "+r.URL.Path)
		defer task.End()
		rng := rand.New(rand.NewSource(n))
		trace.Logf(ctx, "request", "id=%d path=%s", n, r.URL.Path)
		trace.WithRegion(ctx, "auth", func() {
			if n%32 == 0 {
				sessMu.Lock()
				sessions[n%1024] = r.URL.RawQuery
				sessMu.Unlock()
				return
			}
			sessMu.RLock()
			user := sessions[n%1024]
			sessMu.RUnlock()
			trace.Log(ctx, "user", user)
		})
		blob := work(ctx, rng, 512+rng.Intn(4096))
		var sum int
		trace.WithRegion(ctx, "lock state", func() {
			sum = state.record(r.URL.Path, blob)
		})
		if n%3 == 0 {
			// A downstream call with a deadline: a timer wins the select.
			trace.WithRegion(ctx, "downstream", func() {
				dctx, cancel := context.WithTimeout(ctx, time.Duration(200+rng.Intn(800))*time.Microsecond)
				defer cancel()
				select {
				case <-dctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			})
		}
		if *fileEvery > 0 && n%int64(*fileEvery) == 0 {
			got, err := scratch.roundTrip(ctx, int(n), blob)
			if err != nil {
				trace.Log(ctx, "error", err.Error())
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			trace.Logf(ctx, "file", "%d bytes", got)
		}
		trace.WithRegion(ctx, "encode", func() {
			fmt.Fprintf(w, "{\"id\":%d,\"sum\":%d,\"body\":%q}", n, sum, strings.Repeat("x", len(blob)/16))
		})
		select {
		case audit <- "served " + r.URL.Path:
		case <-auditStop:
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		ctx, task := trace.NewTask(r.Context(), "handle /slow")
		defer task.End()
		trace.WithRegion(ctx, "sleep", func() { time.Sleep(2 * time.Millisecond) })
		io.WriteString(w, "slow")
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		wl.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()

	var wg sync.WaitGroup
	stop := make(chan struct{})

	// Background: a ticker flushing stats, a churning retained heap, and
	// AfterFunc callbacks.
	wg.Add(2)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				trace.WithRegion(context.Background(), "flush stats", func() {
					state.mu.Lock()
					total := 0
					for _, c := range state.counts {
						total += c
					}
					state.mu.Unlock()
					trace.Logf(context.Background(), "stats", "total=%d", total)
				})
			}
		}
	}()
	go func() {
		defer wg.Done()
		cache := make([][]byte, 4096)
		var fired int64
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cache[i%len(cache)] = make([]byte, 8<<10)
			if i%64 == 0 {
				time.AfterFunc(time.Millisecond, func() { atomic.AddInt64(&fired, 1) })
				time.Sleep(500 * time.Microsecond)
			}
		}
	}()

	keepAlive := &http.Transport{MaxIdleConnsPerHost: *clients}
	fresh := &http.Transport{DisableKeepAlives: true}
	paths := []string{"/api/users", "/api/orders", "/api/items", "/api/search", "/slow"}
	var failures int64
	var cwg sync.WaitGroup
	for i := 0; i < *clients; i++ {
		cwg.Add(1)
		tr := keepAlive
		if *freshEvery > 0 && i%*freshEvery == 0 {
			tr = fresh
		}
		go func(id int, client *http.Client) {
			defer cwg.Done()
			for n := id; !run.Done(); n++ {
				path := paths[n%len(paths)]
				ctx, task := trace.NewTask(context.Background(), "client")
				region := trace.StartRegion(ctx, "round trip")
				resp, err := client.Get(base + path + "?n=" + strconv.Itoa(n))
				if err != nil {
					region.End()
					task.End()
					atomic.AddInt64(&failures, 1)
					continue
				}
				got, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				trace.Logf(ctx, "response", "%d %d bytes", resp.StatusCode, got)
				region.End()
				task.End()
			}
		}(i, &http.Client{Transport: tr, Timeout: 10 * time.Second})
	}
	cwg.Wait()
	close(stop)
	wg.Wait()
	keepAlive.CloseIdleConnections()
	srv.Close()
	close(auditStop)
	awg.Wait()
	run.Stop()
	fmt.Printf("busyservice: %d requests, %d failed\n", atomic.LoadInt64(&seq), failures)
}
