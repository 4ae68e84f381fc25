// Package wl holds what every gmpscope workload shares: the -trace and
// -duration flags and starting and stopping the execution trace.
package wl

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"time"
)

// Run is one workload invocation.
type Run struct {
	// Duration is how long the workload should keep generating load.
	Duration time.Duration
	// Deadline is when the load should stop (start + Duration).
	Deadline time.Time

	file     *os.File
	cpuprof  bool
	stopOnce bool
}

// Start parses the common flags (plus any the caller registered on
// flag.CommandLine before calling it) and starts tracing when -trace is set.
// cpuSamples says whether the CPU profiler runs by default, which makes the
// tracer record CPU samples too.
func Start(defaultDuration time.Duration, cpuSamples bool) *Run {
	tracePath := flag.String("trace", "", "write a runtime/trace execution trace to this file")
	duration := flag.Duration("duration", defaultDuration, "how long to generate load")
	cpu := flag.Bool("cpuprofile", cpuSamples, "run the CPU profiler so the trace carries CPU samples")
	flag.Parse()

	r := &Run{Duration: *duration}
	if *tracePath != "" {
		f, err := os.Create(*tracePath)
		if err != nil {
			Fatal(err)
		}
		r.file = f
		if *cpu {
			// The profile itself is not wanted, only the samples the
			// tracer copies into the trace.
			if err := pprof.StartCPUProfile(io.Discard); err != nil {
				Fatal(err)
			}
			r.cpuprof = true
		}
		if err := trace.Start(f); err != nil {
			Fatal(err)
		}
	}
	r.Deadline = time.Now().Add(r.Duration)
	return r
}

// Done reports whether the load phase is over.
func (r *Run) Done() bool {
	return !time.Now().Before(r.Deadline)
}

// Stop stops tracing and closes the trace file. Safe to call twice.
func (r *Run) Stop() {
	if r.stopOnce {
		return
	}
	r.stopOnce = true
	if r.file == nil {
		return
	}
	trace.Stop()
	if r.cpuprof {
		pprof.StopCPUProfile()
	}
	if err := r.file.Close(); err != nil {
		Fatal(err)
	}
}

// Fatal prints err and exits with status 1.
func Fatal(err error) {
	fmt.Fprintln(os.Stderr, "workload:", err)
	os.Exit(1)
}
