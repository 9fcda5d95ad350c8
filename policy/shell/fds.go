package shell

import (
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// This file follows which file descriptors may be open on a file. Writing
// to /dev/fd/N, /dev/stdout or /dev/stderr opens the file behind that
// descriptor again, for writing and truncated, whatever mode it was opened
// in: echo x 3<Makefile >/dev/fd/3 empties the Makefile, and so does
// exec >Makefile; echo x >/dev/stdout. Such a write is harmless only when
// the descriptor is not open on a file: the caller's standard streams
// (taken to be pipes or terminals), /dev/null, a pipe, a here-document.

// fdFiles is a set of descriptors that may be open on a file.
type fdFiles struct {
	low uint64 // descriptors 0 to 63
	// high: any descriptor from 10 up may be: bash gives {name}>file
	// redirections one of those, and keeps it open after the command.
	high bool
}

func (s fdFiles) has(n int) bool {
	if n >= 10 && s.high {
		return true
	}
	return n >= 0 && n < 64 && s.low&(1<<n) != 0
}

func (s *fdFiles) set(n int, file bool) {
	switch {
	case n >= 64:
		s.high = s.high || file
	case n < 0:
	case file:
		s.low |= 1 << n
	default:
		s.low &^= 1 << n
	}
}

// fdAlias returns the descriptor a file name opens again: /dev/stdout,
// /dev/stderr, /dev/fd/N. (/dev/stdin and /proc/self/fd/N always count as
// writes to a file.)
func fdAlias(t string) (int, bool) {
	switch t {
	case "/dev/stdout":
		return 1, true
	case "/dev/stderr":
		return 2, true
	}
	if fd, ok := strings.CutPrefix(t, "/dev/fd/"); ok && isDigits(fd) && len(fd) < 6 {
		n, _ := strconv.Atoi(fd)
		return n, true
	}
	return 0, false
}

// harmlessDevices may be written without touching a file.
var harmlessDevices = map[string]bool{"/dev/null": true, "/dev/tty": true}

// harmlessOut reports whether writing to the file t, with the descriptors
// in s open on files, touches no file.
func harmlessOut(t string, s fdFiles) bool {
	if harmlessDevices[t] {
		return true
	}
	if n, ok := fdAlias(t); ok {
		return !s.has(n)
	}
	return false
}

// redirectFDs returns the descriptors a redirection sets, -1 for bash's
// {name}> form, and whether it is that form.
func redirectFDs(r Redirect) []int {
	if r.FD != "" {
		if strings.HasPrefix(r.FD, "{") {
			return []int{-1}
		}
		if n, err := strconv.Atoi(r.FD); err == nil {
			return []int{n}
		}
		return []int{-1}
	}
	switch r.Op {
	case "<", "<>", "<&", "<<", "<<-", "<<<":
		return []int{0}
	case "&>", "&>>", "&>|":
		return []int{1, 2}
	case ">&":
		t := strings.TrimSuffix(r.Target, "-")
		if r.Dynamic || !(t == "" || isDigits(t)) {
			return []int{1, 2} // >&file is &>file
		}
	}
	return []int{1}
}

// apply updates s for the redirection r, done after those before it, and
// returns whether r writes to a file (for an operator that writes).
func (s *fdFiles) apply(r Redirect) (writes bool) {
	file := false
	switch r.Op {
	case "<<", "<<-", "<<<":
	case ">&", "<&":
		t := strings.TrimSuffix(r.Target, "-")
		switch {
		case r.Dynamic:
			file = true
		case t == "":
		case isDigits(t):
			n, _ := strconv.Atoi(t)
			file = s.has(n)
		default:
			file = true // >&file
		}
		writes = r.Op == ">&" && file && !isDigits(t) && t != ""
	default:
		switch {
		case r.Dynamic:
			file = true
		case r.pipe:
		default:
			file = !harmlessOut(r.Target, *s)
			if _, alias := fdAlias(r.Target); !alias && deviceFiles[r.Target] && r.Target != "/dev/stdin" {
				file = false // /dev/zero, /dev/urandom, ...: devices, not files
			}
		}
		switch r.Op {
		case ">", ">>", ">|", "&>", "&>>", "<>", ">>|", "&>|", "&>>|":
			writes = r.Dynamic || !harmlessOut(r.Target, *s)
		}
	}
	for _, n := range redirectFDs(r) {
		if n < 0 {
			s.high = s.high || file
			continue
		}
		s.set(n, file)
	}
	return writes
}

// fdState returns the descriptors open on files once the redirections
// have been done, in order, after those of base.
func fdState(base fdFiles, rs []Redirect) fdFiles {
	s := base
	for _, r := range rs {
		s.apply(r)
	}
	return s
}

// fixWrites sets Writes of own, the redirections of a statement done after
// inherited (those of the commands around it), from the descriptors they
// find open.
func (w *walker) fixWrites(inherited, own []Redirect) {
	s := fdState(w.fds, inherited)
	for i := range own {
		own[i].Writes = s.apply(own[i])
	}
}

// execFDs returns the descriptors that the string's exec commands, and its
// {name}> redirections, which bash keeps open, may leave open on a file,
// starting from base: they stay open for every command after them, and
// before them too in a loop. A descriptor duplicated from another counts
// when that one may be open on a file, or when the exec runs inside a
// command with redirections of its own.
func (w *walker) execFDs(f *syntax.File, base fdFiles) fdFiles {
	type found struct {
		rs     []Redirect
		nested bool
	}
	var execs []found
	var stack []syntax.Node
	redirected := 0
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if s, ok := top.(*syntax.Stmt); ok && len(s.Redirs) > 0 {
				redirected--
			}
			return true
		}
		stack = append(stack, n)
		s, ok := n.(*syntax.Stmt)
		if !ok || len(s.Redirs) == 0 {
			return true
		}
		redirected++
		rs := w.quietRedirects(s.Redirs)
		switch {
		case w.isExec(s):
			execs = append(execs, found{rs, redirected > 1})
		default:
			for _, r := range rs {
				if strings.HasPrefix(r.FD, "{") {
					execs = append(execs, found{[]Redirect{r}, redirected > 1})
				}
			}
		}
		return true
	})
	g := base
	for changed := true; changed; {
		changed = false
		for _, e := range execs {
			s := g
			if e.nested {
				s = fdFiles{low: ^uint64(0), high: true}
			}
			for _, r := range e.rs {
				s.apply(r)
				for _, n := range redirectFDs(r) {
					file := n < 0 && s.high || n >= 0 && s.has(n)
					if file && !(n < 0 && g.high || n >= 0 && g.has(n)) {
						if n < 0 {
							g.high = true
						} else {
							g.set(n, true)
						}
						changed = true
					}
				}
			}
		}
	}
	return g
}

// isExec reports whether a statement runs exec, whose redirections stay
// in force for the rest of the shell (also as command exec, builtin exec).
func (w *walker) isExec(s *syntax.Stmt) bool {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok {
		return false
	}
	for _, x := range call.Args {
		u := w.unquote(x)
		if !u.static {
			return false
		}
		switch u.val {
		case "exec":
			return true
		case "command", "builtin", "-p":
			continue
		}
		return false
	}
	return false
}

// quietRedirects reads redirections as redirects does, without scanning
// their words or recording reasons.
func (w *walker) quietRedirects(rs []*syntax.Redirect) []Redirect {
	out := make([]Redirect, 0, len(rs))
	for _, r := range rs {
		rd := Redirect{Op: r.Op.String()}
		if r.N != nil {
			rd.FD = r.N.Value
		}
		if r.Word != nil && r.Op != syntax.Hdoc && r.Op != syntax.DashHdoc {
			t := w.unquote(r.Word)
			rd.Target, rd.Dynamic, rd.pipe = t.val, !t.static && !t.procSubst || t.glob || hasBrace(r.Word), t.procSubst
		}
		out = append(out, rd)
	}
	return out
}
