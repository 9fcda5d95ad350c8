package shell

import "strings"

// sed.go, awk.go and jq.go model sed, awk and jq: their options, and the
// scripts and filters they run. This file holds what they share.

// scriptWord reviews a script, program or filter given as an operand
// that the shell or find replaces by file names at run time: a pattern,
// or find -exec's {}. The file's name would be the program.
func (c *check) scriptWord(w word) {
	fromFind := len(c.cmd.Via) > 0 && strings.HasPrefix(c.cmd.Via[len(c.cmd.Via)-1], "find -")
	if w.glob || w.multi || fromFind && strings.Contains(w.val, "{}") {
		c.review("takes its program from a word that becomes a file name at run time (" + w.val + ")")
	}
}
