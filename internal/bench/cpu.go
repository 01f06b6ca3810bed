package bench

import (
	"bufio"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is CPU time spent over an interval by this process and by
// everything else on the machine.
type cpuUse struct {
	self, others time.Duration
	// allocs and allocBytes are the heap allocations this process made.
	allocs, allocBytes uint64
}

// cpuMeter measures CPU use from its creation to since.
type cpuMeter struct {
	self, machine      time.Duration
	machineOK          bool
	allocs, allocBytes uint64
}

func startCPU() cpuMeter {
	m, ok := machineBusy()
	objs, bytes := heapAllocs()
	return cpuMeter{self: selfCPU(), machine: m, machineOK: ok, allocs: objs, allocBytes: bytes}
}

// since returns the CPU time used since the meter started. others is 0
// where the machine's total is unknown (no /proc/stat).
func (c cpuMeter) since() cpuUse {
	u := cpuUse{self: selfCPU() - c.self}
	objs, bytes := heapAllocs()
	u.allocs, u.allocBytes = objs-c.allocs, bytes-c.allocBytes
	if m, ok := machineBusy(); ok && c.machineOK {
		u.others = max(0, m-c.machine-u.self)
	}
	return u
}

// selfCPU is the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// userHZ is the unit of /proc/stat: USER_HZ, 100 on every Linux ABI Go
// supports.
const userHZ = 100

// machineBusy is the busy CPU time of the whole machine since boot (every
// state of /proc/stat's cpu line but idle and iowait; steal included, as
// time a virtual machine did not get), and whether it is known.
func machineBusy() (time.Duration, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for i, name := range []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"} {
		n, err := strconv.ParseInt(fields[i+1], 10, 64)
		if err != nil {
			return 0, false
		}
		if name != "idle" && name != "iowait" {
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / userHZ, true
}

// heapAllocs is the number and size of the heap allocations this process
// has made (runtime/metrics: cheap, no stop-the-world).
func heapAllocs() (objects, bytes uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		objects = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		bytes = s[1].Value.Uint64()
	}
	return objects, bytes
}
