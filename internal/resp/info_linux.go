package resp

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// osDescription names the system as Redis's INFO does, from uname: "Linux 6.1.0 x86_64".
var osDescription = sync.OnceValue(func() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "Linux"
	}
	return utsField(u.Sysname[:]) + " " + utsField(u.Release[:]) + " " + utsField(u.Machine[:])
})

// utsField reads a NUL-terminated field of Utsname, whose bytes are signed on some architectures.
func utsField[T int8 | uint8](field []T) string {
	b := make([]byte, 0, len(field))
	for _, c := range field {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// residentMemory is the process's resident set, from /proc/self/statm.
func residentMemory() (uint64, bool) {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	fields := bytes.Fields(statm)
	if len(fields) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseUint(string(fields[1]), 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * uint64(os.Getpagesize()), true
}

// systemMemory is the machine's physical memory.
func systemMemory() (uint64, bool) {
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return 0, false
	}
	return uint64(info.Totalram) * uint64(info.Unit), true
}

// cpuTimes reads the processor time of the process and of its children waited for.
func cpuTimes() (processCPU, bool) {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return processCPU{}, false
	}
	return processCPU{
		sys: timeval(self.Stime), user: timeval(self.Utime),
		childSys: timeval(children.Stime), childUser: timeval(children.Utime),
	}, true
}

func timeval(tv syscall.Timeval) time.Duration { return time.Duration(tv.Nano()) }
