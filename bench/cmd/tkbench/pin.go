package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// CPUs of a pinned section: the load generator (this process) on one, the
// servers and their databases on the other, so that neither takes the
// other's CPU and a comparison measures the server, not the scheduler.
const (
	clientCPU = 0
	serverCPU = 1
)

// pinPlan decides whether a section can be pinned: it must be asked for,
// taskset must exist (it starts the servers on serverCPU) and the process
// must have at least two CPUs. why says what stood in the way, if anything.
func pinPlan(want bool, tasksetPath string, cpus int) (ok bool, why string) {
	switch {
	case !want:
		return false, "Not pinned (-pin=false)"
	case tasksetPath == "":
		return false, "Not pinned: taskset not found"
	case cpus < 2:
		return false, fmt.Sprintf("Not pinned: %d CPU", cpus)
	}
	return true, fmt.Sprintf("Pinned: servers, Postgres and dynalite on CPU %d (taskset -c %d), the load generator (tkbench) on CPU %d",
		serverCPU, serverCPU, clientCPU)
}

// pinning is the state of a pinned section.
type pinning struct {
	on   bool
	note string   // for the report
	wrap []string // command line prefix that starts a server on serverCPU
}

// newPinning plans the pinning of a section from the -pin flag and the
// machine.
func newPinning(want bool) pinning {
	ts, _ := exec.LookPath("taskset")
	ok, why := pinPlan(want, ts, runtime.NumCPU())
	p := pinning{on: ok, note: why}
	if ok {
		p.wrap = []string{ts, "-c", strconv.Itoa(serverCPU)}
	}
	return p
}

// pinSelf moves every thread of this process to cpu and returns a function
// that gives them back the CPUs they had. A thread started meanwhile
// inherits the affinity of the thread that started it, so after a pass over
// /proc/self/task that finds every thread already moved, all are.
func pinSelf(cpu int) (restore func() error, err error) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := setAllThreads(&set); err != nil {
		_ = setAllThreads(&old)
		return nil, err
	}
	return func() error { return setAllThreads(&old) }, nil
}

// setAllThreads sets the affinity of every thread of the process to set,
// repeating until a pass finds nothing left to change (at most 5 passes).
func setAllThreads(set *unix.CPUSet) error {
	for range 5 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		changed := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			var cur unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &cur); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // the thread has exited
				}
				return fmt.Errorf("sched_getaffinity %d: %w", tid, err)
			}
			if cur == *set {
				continue
			}
			changed = true
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("sched_setaffinity %d: %w", tid, err)
			}
		}
		if !changed {
			return nil
		}
	}
	return errors.New("sched_setaffinity: threads kept appearing with other CPUs")
}
