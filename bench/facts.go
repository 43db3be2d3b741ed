package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// machineFacts describes the machine the numbers come from.
func machineFacts() [][2]string {
	facts := [][2]string{
		{"date", time.Now().UTC().Format("2006-01-02 15:04 UTC")},
		{"go", runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH},
		{"cpu", cpuModel()},
		{"cores", fmt.Sprint(runtime.NumCPU())},
	}
	if mem := memTotal(); mem != "" {
		facts = append(facts, [2]string{"memory", mem})
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		facts = append(facts, [2]string{"kernel", strings.TrimSpace(string(b))})
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			facts = append(facts, [2]string{"load average at start", strings.Join(f[:3], " ")})
		}
	}
	return facts
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return ""
}

func printFacts(w io.Writer, cfg config, facts [][2]string, missing []string) {
	if cfg.markdown {
		if cfg.page == "" { // a page says so in its head
			fmt.Fprintf(w, "Produced by `%s`.\n\n", cfg.commandLine)
		}
		fmt.Fprintf(w, "| machine | |\n|:---|:---|\n")
		for _, f := range facts {
			fmt.Fprintf(w, "| %s | %s |\n", f[0], f[1])
		}
		fmt.Fprintln(w)
		for _, m := range missing {
			fmt.Fprintf(w, "- %s\n", m)
		}
		if len(missing) > 0 {
			fmt.Fprintln(w)
		}
		return
	}
	fmt.Fprintf(w, "%s\n\n", cfg.commandLine)
	for _, f := range facts {
		fmt.Fprintf(w, "%-22s %s\n", f[0]+":", f[1])
	}
	for _, m := range missing {
		fmt.Fprintf(w, "* %s\n", m)
	}
	fmt.Fprintln(w)
}
