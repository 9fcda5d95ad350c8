package main

import "os"

// sigStop: Windows has no stop signal. This one is never delivered
// (signal.Notify ignores a signal that is not the system's).
var sigStop os.Signal = noSignal{}

type noSignal struct{}

func (noSignal) String() string { return "no signal" }
func (noSignal) Signal()        {}
