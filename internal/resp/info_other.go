//go:build !linux

package resp

import "runtime"

// osDescription names the system. Only Linux is described as Redis describes it, from uname.
func osDescription() string { return runtime.GOOS + " " + runtime.GOARCH }

// residentMemory is not read outside Linux: INFO reports the memory the Go runtime mapped instead.
func residentMemory() (uint64, bool) { return 0, false }

// systemMemory is not read outside Linux: INFO leaves the field out.
func systemMemory() (uint64, bool) { return 0, false }

// cpuTimes is not read outside Linux: INFO's CPU section stays empty.
func cpuTimes() (processCPU, bool) { return processCPU{}, false }
