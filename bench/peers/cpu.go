package main

import (
	"syscall"
	"time"
)

// processCPU returns the user plus system CPU time this process has used so far, all threads included:
// the clusters under test and the load generator alike.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter measures the cores used between its start and a reading.
type cpuMeter struct {
	wall time.Time
	cpu  time.Duration
}

func startCPUMeter() cpuMeter { return cpuMeter{wall: time.Now(), cpu: processCPU()} }

// cores returns the CPU time used since the start divided by the wall time elapsed.
func (m cpuMeter) cores() float64 {
	wall := time.Since(m.wall)
	if wall <= 0 {
		return 0
	}
	return float64(processCPU()-m.cpu) / float64(wall)
}
