// Command loadgen sends a steady mix of requests to demoservice (or any HTTP
// service with the same paths) so the live dashboard has traffic to show:
// -c concurrent clients, about -rps requests per second in all, one in
// -io-every of them to /io (blocking file I/O), the rest to /. Runs until
// -duration is over (0: forever) and prints a one-line summary every 10 s.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	target := flag.String("target", "http://127.0.0.1:8090", "base URL of the service")
	rps := flag.Int("rps", 200, "requests per second, all clients together")
	clients := flag.Int("c", 8, "concurrent clients")
	ioEvery := flag.Int("io-every", 10, "one request in this many goes to /io")
	duration := flag.Duration("duration", 0, "how long to run (0: until killed)")
	flag.Parse()

	base := strings.TrimRight(*target, "/")
	var ok, failed int64
	per := time.Duration(0)
	if *rps > 0 {
		per = time.Duration(int64(time.Second) * int64(*clients) / int64(*rps))
	}
	stop := make(chan struct{})
	if *duration > 0 {
		time.AfterFunc(*duration, func() { close(stop) })
	}
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for c := 0; c < *clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; ; i += *clients {
				select {
				case <-stop:
					return
				default:
				}
				path := "/"
				if *ioEvery > 0 && i%*ioEvery == 0 {
					path = "/io"
				}
				resp, err := client.Get(base + path)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					atomic.AddInt64(&ok, 1)
				} else {
					atomic.AddInt64(&failed, 1)
					time.Sleep(200 * time.Millisecond)
				}
				if per > 0 {
					time.Sleep(per)
				}
			}
		}(c)
	}
	go func() {
		for range time.Tick(10 * time.Second) {
			fmt.Fprintf(os.Stderr, "loadgen: %d ok, %d failed\n", atomic.LoadInt64(&ok), atomic.LoadInt64(&failed))
		}
	}()
	wg.Wait()
	fmt.Printf("loadgen: %d ok, %d failed\n", ok, failed)
}
