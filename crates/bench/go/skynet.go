// skynet on goroutines, the peer of symmetry's `peer-skynet` experiment.
//
// The root goroutine starts 10 children, each starts 10, down to LEAVES
// leaves; every goroutine sends its sum to its parent over a channel.
// Usage: skynet LEAVES (GOMAXPROCS from the environment). Prints one line:
// ns=<elapsed> sum=<sum> peak_rss_bytes=<peak above start> procs=<GOMAXPROCS>
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func skynet(c chan<- uint64, num, size uint64) {
	if size <= 1 {
		c <- num
		return
	}
	sub := size / 10
	rc := make(chan uint64, 10)
	for i := uint64(0); i < 10; i++ {
		go skynet(rc, num+i*sub, sub)
	}
	var sum uint64
	for i := 0; i < 10; i++ {
		sum += <-rc
	}
	c <- sum
}

// status reads a "Vm...:  N kB" line of /proc/self/status, in bytes.
func status(key string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key) {
			f := strings.Fields(l)
			if len(f) >= 2 {
				v, _ := strconv.ParseUint(f[1], 10, 64)
				return v * 1024
			}
		}
	}
	return 0
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: skynet LEAVES")
		os.Exit(2)
	}
	leaves, err := strconv.ParseUint(os.Args[1], 10, 64)
	if err != nil || leaves == 0 {
		fmt.Fprintln(os.Stderr, "skynet: LEAVES must be a positive integer")
		os.Exit(2)
	}
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	rss0 := status("VmRSS:")
	c := make(chan uint64)
	start := time.Now()
	go skynet(c, 0, leaves)
	sum := <-c
	el := time.Since(start)
	peak := status("VmHWM:")
	if peak > rss0 {
		peak -= rss0
	} else {
		peak = 0
	}
	fmt.Printf("ns=%d sum=%d peak_rss_bytes=%d procs=%d\n", el.Nanoseconds(), sum, peak, runtime.GOMAXPROCS(0))
}
