package wag

import (
	"bytes"
	"os"
	"strconv"
)

// clockTicks is USER_HZ, the unit of CPU times in /proc/<pid>/stat: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

var pageSize = uint64(os.Getpagesize())

// procSample reads a process's CPU time (in clock ticks) and resident set
// (in bytes) from /proc/<pid>/stat. ok is false where /proc does not exist
// or the process is gone.
func procSample(pid int) (ticks, rss uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime 15, rss 24.
	if len(f) < 22 {
		return 0, 0, false
	}
	utime, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	pages, err3 := strconv.ParseInt(string(f[21]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	if pages < 0 {
		pages = 0
	}
	return utime + stime, uint64(pages) * pageSize, true
}
