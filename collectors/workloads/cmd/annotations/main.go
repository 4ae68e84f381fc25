// Command annotations exercises the user annotation API: tasks (nested,
// ended on another goroutine, begun before tracing started, never ended),
// nested regions, and logs whose strings hold unicode, quotes, escapes,
// invalid UTF-8, empty and over-long values.
package main

import (
	"context"
	"fmt"
	"runtime/trace"
	"strings"
	"sync"
	"time"

	"gmpscope/workloads/internal/wl"
)

// Strings a tracing tool must carry through unchanged.
var awkward = []string{
	"héllo wörld ✓ 日本語 🚀",
	`say "hi" and 'bye'`,
	`C:\temp\new folder\`,
	"line one\nline two\ttabbed\r",
	"",
	"nul\x00inside",
	"bad utf-8: \xff\xfe\xc3",
	"emoji 👩‍👩‍👧 zwj, combining é, rtl שלום",
}

func work(n int) int {
	x := n
	for i := 0; i < 2000; i++ {
		x = x*31 + i
	}
	return x
}

func main() {
	// A task that starts before tracing does: the trace sees only its end.
	early, earlyTask := trace.NewTask(context.Background(), "begun before tracing")

	run := wl.Start(300*time.Millisecond, false)
	defer run.Stop()

	trace.Log(context.Background(), "no task", "a log outside any task")
	trace.Log(early, "early", "logged into a task begun before the trace")
	earlyTask.End()

	long := strings.Repeat("0123456789abcdef", 200) // 3200 bytes
	trace.Log(context.Background(), "long", long)
	trace.Log(context.Background(), long, "long category")

	for i, s := range awkward {
		trace.Log(context.Background(), s, fmt.Sprintf("message %d: %s", i, s))
		trace.WithRegion(context.Background(), s, func() { work(i) })
	}

	var sink int
	var mu sync.Mutex
	round := 0
	for !run.Done() && round < 40 {
		round++
		ctx, task := trace.NewTask(context.Background(), "request")
		trace.Logf(ctx, "request", "round %d of %q", round, awkward[round%len(awkward)])
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				sub, subTask := trace.NewTask(ctx, fmt.Sprintf("shard-%d", w))
				defer subTask.End()
				outer := trace.StartRegion(sub, "outer")
				trace.WithRegion(sub, "middle", func() {
					trace.WithRegion(sub, "inner ✓", func() {
						mu.Lock()
						sink += work(w)
						mu.Unlock()
						trace.Log(sub, "shard", awkward[w%len(awkward)])
					})
					time.Sleep(100 * time.Microsecond)
				})
				outer.End()
			}(w)
		}
		// The parent task ends on another goroutine than the one that
		// began it.
		done := make(chan struct{})
		go func() {
			wg.Wait()
			task.End()
			close(done)
		}()
		<-done
		time.Sleep(2 * time.Millisecond)
	}

	// Left open when tracing stops: a task and a region never ended.
	open, _ := trace.NewTask(context.Background(), "never ended")
	r := trace.StartRegion(open, "still running")
	trace.Log(open, "final", fmt.Sprint(sink%10))
	run.Stop()
	r.End()
}
