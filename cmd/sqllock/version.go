package main

import (
	"runtime/debug"
	"strings"
)

// version says what sqllock was built from: the module version that
// `go install github.com/sqllock/sqllock/cmd/sqllock@v1.2.3` records, or for
// a build from a checkout the pseudo-version and revision Go stamps
// (-buildvcs), and the Go toolchain and platform.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "sqllock (version unknown: built without module support)"
	}
	return describeBuild(info)
}

func describeBuild(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var vcs []string
	if rev := settings["vcs.revision"]; rev != "" {
		vcs = append(vcs, "commit "+rev[:min(len(rev), 12)])
	}
	if t := settings["vcs.time"]; t != "" {
		vcs = append(vcs, t)
	}
	if settings["vcs.modified"] == "true" {
		vcs = append(vcs, "modified")
	}
	out := "sqllock " + v
	if len(vcs) > 0 {
		out += " (" + strings.Join(vcs, ", ") + ")"
	}
	out += " " + info.GoVersion
	if goos, goarch := settings["GOOS"], settings["GOARCH"]; goos != "" && goarch != "" {
		out += " " + goos + "/" + goarch
	}
	return out
}
