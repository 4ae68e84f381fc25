// Command cpuquota reproduces CPU quota throttling with GOMAXPROCS above the
// quota: the runtime runs goroutines on threads the kernel has taken off the
// CPU, time the Go trace shows as Running. The program moves itself into a
// new cgroup limited to -quota CPUs (cgroup v2 cpu.max, else cgroup v1
// cpu.cfs_quota_us; it needs root) and runs -workers goroutines that each
// compute ~1 ms and sleep ~1 ms, with GOMAXPROCS -procs. Without a writable
// cgroup (-mode hog, or auto when none is writable) it starts -procs CPU hog
// processes (itself with -hog) pinned to its own CPUs instead: noisy
// neighbours. -await-stdin waits for a line on stdin before the load starts
// (so a recorder can attach first); -linger keeps it idle after the load,
// saying "cpuquota: done" on stderr. Runs 1 s by default.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"gmpscope/workloads/internal/wl"
)

const (
	cgroupV2 = "/sys/fs/cgroup"
	cgroupV1 = "/sys/fs/cgroup/cpu"
	periodUS = 100000
)

func spin(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// limit is a cgroup the process moved into, and how to leave it.
type limit struct {
	dir, parentProcs, how string
	left                  bool
}

func writeFile(path, value string) error {
	return os.WriteFile(path, []byte(value), 0o644)
}

// enterCgroup moves the whole process into a new cgroup with the quota.
func enterCgroup(quota float64, mode string) (*limit, error) {
	quotaUS := int(quota * periodUS)
	name := "gmpscope-cpuquota-" + strconv.Itoa(os.Getpid())
	if mode == "auto" || mode == "v2" {
		if ctl, err := os.ReadFile(filepath.Join(cgroupV2, "cgroup.controllers")); err == nil &&
			strings.Contains(string(ctl), "cpu") {
			_ = writeFile(filepath.Join(cgroupV2, "cgroup.subtree_control"), "+cpu")
			dir := filepath.Join(cgroupV2, name)
			if err := os.Mkdir(dir, 0o755); err == nil {
				max := fmt.Sprintf("%d %d", quotaUS, periodUS)
				if err := writeFile(filepath.Join(dir, "cpu.max"), max); err == nil {
					if err := writeFile(filepath.Join(dir, "cgroup.procs"), "0"); err == nil {
						return &limit{dir: dir, parentProcs: filepath.Join(cgroupV2, "cgroup.procs"), how: "cgroup v2 cpu.max " + max}, nil
					}
				}
				_ = os.Remove(dir)
			}
		}
		if mode == "v2" {
			return nil, fmt.Errorf("no writable cgroup v2 with the cpu controller at %s", cgroupV2)
		}
	}
	dir := filepath.Join(cgroupV1, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("no writable cgroup (v2 at %s, v1 at %s): %v", cgroupV2, cgroupV1, err)
	}
	if err := writeFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.Itoa(periodUS)); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.Itoa(quotaUS)); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	how := fmt.Sprintf("cgroup v1 cpu.cfs_quota_us %d cpu.cfs_period_us %d", quotaUS, periodUS)
	return &limit{dir: dir, parentProcs: filepath.Join(cgroupV1, "cgroup.procs"), how: how}, nil
}

func (l *limit) leave() {
	if l.left {
		return
	}
	l.left = true
	_ = writeFile(l.parentProcs, strconv.Itoa(os.Getpid()))
	_ = os.Remove(l.dir)
}

// startHogs starts n copies of this program spinning until the deadline,
// pinned to this process's CPUs with taskset.
func startHogs(n int, until time.Time) ([]*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cpus := fmt.Sprintf("0-%d", runtime.NumCPU()-1)
	var hogs []*exec.Cmd
	for i := 0; i < n; i++ {
		ms := strconv.FormatInt(time.Until(until).Milliseconds()+100, 10)
		cmd := exec.Command("taskset", "-c", cpus, self, "-hog", ms+"ms")
		if err := cmd.Start(); err != nil {
			return hogs, err
		}
		hogs = append(hogs, cmd)
	}
	return hogs, nil
}

func main() {
	procs := flag.Int("procs", 4, "GOMAXPROCS (above the quota)")
	quota := flag.Float64("quota", 0.25, "CPUs the cgroup may use per period")
	workers := flag.Int("workers", 8, "goroutines computing and sleeping")
	mode := flag.String("mode", "auto", "auto, v2, v1 (cgroup quota), hog (pinned CPU hogs) or none (no limit: the control)")
	hog := flag.Duration("hog", 0, "internal: spin this long and exit (a hog process)")
	await := flag.Bool("await-stdin", false, "wait for a line on stdin before the load starts")
	linger := flag.Duration("linger", 0, "stay idle this long after the load (and say so on stderr)")
	run := wl.Start(time.Second, false)
	defer run.Stop()
	runtime.GOMAXPROCS(*procs)
	if *hog > 0 {
		end := time.Now().Add(*hog)
		for time.Now().Before(end) {
			spin(100000)
		}
		return
	}
	var lim *limit
	var hogs []*exec.Cmd
	how := ""
	if *mode != "hog" && *mode != "none" {
		l, err := enterCgroup(*quota, *mode)
		if err != nil && *mode != "auto" {
			wl.Fatal(err)
		}
		if l != nil {
			lim, how = l, l.how
			defer lim.leave()
		}
	}
	if *await {
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			wl.Fatal(fmt.Errorf("-await-stdin: %v", err))
		}
		// The load lasts -duration from now.
		run.Deadline = time.Now().Add(run.Duration)
	}
	if *mode == "none" {
		how = "no limit"
	} else if lim == nil {
		var err error
		hogs, err = startHogs(*procs, run.Deadline)
		if err != nil {
			wl.Fatal(err)
		}
		how = fmt.Sprintf("%d CPU hogs pinned with taskset", len(hogs))
	}
	fmt.Fprintf(os.Stderr, "cpuquota: pid %d, GOMAXPROCS %d, %s\n", os.Getpid(), *procs, how)

	var wg sync.WaitGroup
	sinks := make([]uint64, *workers)
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for !run.Done() {
				// About a millisecond of work, then a millisecond's sleep: a
				// request handler's shape.
				sinks[i] += spin(300000)
				time.Sleep(time.Millisecond)
			}
		}(i)
	}
	wg.Wait()
	for _, h := range hogs {
		_ = h.Wait()
	}
	if lim != nil {
		// Out of the quota before the trace is flushed: throttled, writing
		// it out took seconds.
		lim.leave()
	}
	run.Stop()
	if *linger > 0 {
		fmt.Fprintln(os.Stderr, "cpuquota: done")
		time.Sleep(*linger)
	}
}
