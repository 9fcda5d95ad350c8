package agent

// OpenCalls lets the external tests check which calls a thread's turn
// leaves open, as TurnProgress reads them.
var OpenCalls = openCalls

// ArgsDigest lets the external tests compare the run's legacy digest of a
// call with the package's [ArgsDigest].
func (c *ToolCallContext) ArgsDigest() string { return c.argsDigest() }

// Validations is how many times a run's decisions checked calls'
// arguments for t against its schema.
func Validations(t *Tool) int64 { return t.validations.Load() }
