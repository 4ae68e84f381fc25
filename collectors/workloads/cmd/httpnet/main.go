// Command httpnet is a netpoll-heavy HTTP client and server on loopback:
// many concurrent clients, some reusing keep-alive connections and some
// dialing a new connection for every request, so goroutines keep parking
// in the network poller and being woken by it.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gmpscope/workloads/internal/wl"
)

func main() {
	clients := flag.Int("clients", 24, "concurrent client goroutines")
	maxRequests := flag.Int64("max-requests", 500, "stop after this many requests in total (bounds the trace size)")
	run := wl.Start(300*time.Millisecond, false)
	defer run.Stop()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		wl.Fatal(err)
	}
	body := strings.Repeat("gmpscope ", 512)
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		// A short wait keeps some server goroutines blocked while the
		// client side times its own reads in the poller.
		time.Sleep(2 * time.Millisecond)
		fmt.Fprint(w, "slow")
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()

	keepAlive := &http.Transport{MaxIdleConnsPerHost: 8}
	fresh := &http.Transport{DisableKeepAlives: true}
	paths := []string{"/small", "/big", "/slow"}

	var done int64
	var failures int64
	var wg sync.WaitGroup
	for i := 0; i < *clients; i++ {
		wg.Add(1)
		tr := keepAlive
		if i%3 == 0 {
			tr = fresh
		}
		go func(id int, client *http.Client) {
			defer wg.Done()
			for n := id; !run.Done(); n++ {
				if atomic.AddInt64(&done, 1) > *maxRequests {
					return
				}
				resp, err := client.Get(base + paths[n%len(paths)])
				if err != nil {
					atomic.AddInt64(&failures, 1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}(i, &http.Client{Transport: tr, Timeout: 5 * time.Second})
	}
	wg.Wait()
	keepAlive.CloseIdleConnections()
	srv.Close()
	run.Stop()
	if failures > 0 {
		fmt.Printf("httpnet: %d failed requests\n", failures)
	}
}
