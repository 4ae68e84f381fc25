// Command demoservice is a small long-running HTTP service for gmpscope's live
// dashboard: it registers net/http/pprof (so /debug/pprof/trace?seconds=N
// works), serves a few endpoints that exercise the runtime in recognisable
// ways, and runs forever (until killed).
//
//	GET /            a little CPU work and a small allocation
//	GET /io          blocking file I/O: write, fsync and read back a temporary file
//	GET /burst?n=N&ms=M   start N goroutines that block on a channel for M ms
//	                 (a distinctive spike of Waiting goroutines; answers at once)
//	GET /healthz     "ok"
//
// In the background it allocates (so the GC runs) and, every -leak-every, dials
// its own listener and never closes the connection: the server's goroutine for
// it stays parked in the network poller (the odd leaked connection).
//
// It prints "demoservice: listening on http://HOST:PORT" once it accepts
// connections; -addr 127.0.0.1:0 (the default) picks a free port. SIGINT or
// SIGTERM end it after removing its scratch directory (in $TMPDIR).
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	requests int64
	retained [][]byte
	retainMu sync.Mutex
)

func root(w http.ResponseWriter, r *http.Request) {
	atomic.AddInt64(&requests, 1)
	sum := 0
	for i := 0; i < 20000; i++ {
		sum += i * i % 7
	}
	buf := make([]byte, 4096)
	buf[0] = byte(sum)
	fmt.Fprintf(w, "hello %d\n", len(buf)+int(buf[0]))
}

func fileIO(dir string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt64(&requests, 1)
		f, err := os.CreateTemp(dir, "io-*")
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer os.Remove(f.Name())
		defer f.Close()
		data := make([]byte, 64<<10)
		for i := 0; i < 4; i++ {
			if _, err := f.Write(data); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
		}
		if err := f.Sync(); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		n, _ := io.Copy(io.Discard, f)
		fmt.Fprintf(w, "io %d\n", n)
	}
}

func burst(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.FormValue("n"))
	if err != nil || n <= 0 || n > 100000 {
		n = 500
	}
	ms, err := strconv.Atoi(r.FormValue("ms"))
	if err != nil || ms <= 0 || ms > 60000 {
		ms = 500
	}
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			started.Done()
			<-release
		}()
	}
	started.Wait()
	time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { close(release) })
	fmt.Fprintf(w, "{\"n\": %d, \"ms\": %d, \"unix_ns\": %d}\n", n, ms, time.Now().UnixNano())
}

func background(addr string, leakEvery time.Duration) {
	// Allocation pressure with a small retained heap, so the GC has work.
	go func() {
		for i := 0; ; i++ {
			b := make([]byte, 32<<10)
			retainMu.Lock()
			if len(retained) >= 256 {
				retained = retained[1:]
			}
			retained = append(retained, b)
			retainMu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	if leakEvery <= 0 {
		return
	}
	go func() {
		var leaked []net.Conn
		for {
			time.Sleep(leakEvery)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				continue
			}
			// Half a request line, never finished and never closed.
			c.Write([]byte("GET / HTTP/1.1\r\n"))
			leaked = append(leaked, c)
			if len(leaked) > 1000 {
				leaked[0].Close()
				leaked = leaked[1:]
			}
		}
	}()
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	leakEvery := flag.Duration("leak-every", 2*time.Second, "leak one connection this often (0: never)")
	flag.Parse()

	dir, err := os.MkdirTemp("", "demoservice-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Stopped by a signal (Ctrl-C, `make run` stopping it, docker stop), it removes
	// its scratch directory before it goes.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-stop
		os.RemoveAll(dir)
		os.Exit(0)
	}()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("/", root)
	http.HandleFunc("/io", fileIO(filepath.Clean(dir)))
	http.HandleFunc("/burst", burst)
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	background(ln.Addr().String(), *leakEvery)
	fmt.Printf("demoservice: listening on http://%s\n", ln.Addr().String())
	os.Stdout.Sync()
	log.Fatal(http.Serve(ln, nil))
}
