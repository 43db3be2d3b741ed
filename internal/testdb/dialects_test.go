package testdb

import (
	"maps"
	"slices"
	"testing"
)

func TestChosenDialects(t *testing.T) {
	for env, want := range map[string][]string{
		"":                  {"mysql", "postgres", "sqlite"},
		"  ":                {"mysql", "postgres", "sqlite"},
		"postgres":          {"postgres"},
		"mysql":             {"mysql"},
		"sqlite":            {"sqlite"},
		"postgres, mysql":   {"mysql", "postgres"},
		"postgres,postgres": {"postgres"},
	} {
		t.Setenv(dialectsEnv, env)
		chosen, err := chosenDialects()
		if err != nil {
			t.Errorf("%s=%q: %v", dialectsEnv, env, err)
			continue
		}
		if got := slices.Sorted(maps.Keys(chosen)); !slices.Equal(got, want) {
			t.Errorf("%s=%q chose %v, want %v", dialectsEnv, env, got, want)
		}
	}
	// A typo or a stray comma must fail the run, not test nothing.
	for _, env := range []string{"postgresql", "postgres,", "mariadb", ",", "sqlite3"} {
		t.Setenv(dialectsEnv, env)
		if chosen, err := chosenDialects(); err == nil {
			t.Errorf("%s=%q chose %v, want an error", dialectsEnv, env, chosen)
		}
	}
}
