//go:build !linux

package main

import (
	"errors"
	"os"
)

// On systems other than Linux the prompt reads whole lines: no live
// countdown (the deadline is printed), no flushing of typed-ahead keys.

var errNoTermios = errors.New("terminal control is implemented on Linux only")

type termios struct{}

func getTermios(*os.File) (*termios, error) { return nil, errNoTermios }
func keysMode(*os.File) (func(), error)     { return nil, errNoTermios }
func flushInput(*os.File)                   {}
func termWidth(*os.File) int                { return 80 }
func dieWithParentGoRun()                   {}

func suspend() {}
