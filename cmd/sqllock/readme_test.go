package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReadmeSetUp: the README's set-up has two commands, the main job and
// the tests, and the main job builds the CLI and runs the binary: through
// go run, every failing exit status would read 1, and 75 (held elsewhere)
// is what a crontab tells apart. CI runs the test command.
func TestReadmeSetUp(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Set up")
	if !ok {
		t.Fatal("README.md has no Set up section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	section, _, _ = strings.Cut(section, "\n### ")
	var commands []string
	for line := range strings.SplitSeq(section, "\n") {
		if cmd, ok := strings.CutPrefix(line, "    "); ok && strings.TrimSpace(cmd) != "" {
			commands = append(commands, cmd)
		}
	}
	if len(commands) != 2 {
		t.Fatalf("the set-up has %d commands, want 2 (the main job, the tests): %q", len(commands), commands)
	}
	// CI runs what the README tells a newcomer to run: each part of the
	// test command is a line of .ci/run.
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	for part := range strings.SplitSeq(commands[1], "&&") {
		part = strings.TrimSpace(part)
		if !slices.Contains(strings.Split(string(ci), "\n"), part) {
			t.Errorf(".ci/run has no line %q, a part of the README's test command %q", part, commands[1])
		}
	}
	if main := commands[0]; strings.Contains(main, "go run") || !strings.HasPrefix(main, "go build -o sqllock ./cmd/sqllock && ./sqllock run ") {
		t.Errorf("the main job's command %q does not build the CLI and run the binary", main)
	}
}
