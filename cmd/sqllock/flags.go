package main

import (
	"errors"
	"flag"
	"strconv"
	"time"
)

// durationFlag is a time.Duration flag whose parse error says what a
// duration looks like: the flag package's own says only "parse error", and
// "--ttl 5" is the mistake people make.
type durationFlag time.Duration

func (d *durationFlag) String() string { return (*time.Duration)(d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err == nil {
		*d = durationFlag(v)
		return nil
	}
	if _, numErr := strconv.ParseFloat(s, 64); numErr == nil {
		return errors.New("a duration needs a unit: for example " + s + "s, " + s + "m or " + s + "h")
	}
	return errors.New("not a duration: use a number with a unit, for example 30s, 5m or 1h30m")
}

// durationVar defines a duration flag on fs; usage should name the value
// with `duration` (backquoted) for the help.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationFlag)(p), name, usage)
}
