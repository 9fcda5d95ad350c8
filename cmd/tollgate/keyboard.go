package main

import (
	"bufio"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// keyboard is what the person types. It reads only when asked (want), so
// that nothing is reading the terminal while $EDITOR has it, and hands
// over each read as a chunk.
type keyboard struct {
	want chan struct{}
	got  chan chunk
	// asked: a read was asked for and has not come back yet.
	asked bool
	// line is the line being typed (terminal mode); lines are the
	// complete lines read ahead (a script piped in).
	line  []byte
	lines []string
	eof   bool
}

type chunk struct {
	data []byte
	err  error
	// at is when the read returned: keys read before a prompt was shown
	// were not typed for it.
	at time.Time
}

// newKeyboard reads r. On a terminal it reads what is there (one key or a
// paste); otherwise one line at a time.
func newKeyboard(r io.Reader, tty bool) *keyboard {
	k := &keyboard{want: make(chan struct{}), got: make(chan chunk)}
	go func() {
		br := bufio.NewReader(r)
		buf := make([]byte, 4096)
		for range k.want {
			var c chunk
			if tty {
				n, err := r.Read(buf)
				c = chunk{data: append([]byte(nil), buf[:n]...), err: err, at: time.Now()}
			} else {
				line, err := br.ReadString('\n')
				c = chunk{data: []byte(line), err: err, at: time.Now()}
			}
			k.got <- c
			if c.err != nil {
				return
			}
		}
	}()
	return k
}

// ask asks for the next read unless one is out or the input has ended.
func (k *keyboard) ask() {
	if k.asked || k.eof {
		return
	}
	k.asked = true
	k.want <- struct{}{}
}

// take adds a chunk read on a terminal to the line being typed: it
// returns the finished line, if Enter was pressed, and whether the
// display needs redrawing. Editing keys: Backspace, Ctrl-U (clear),
// Ctrl-W (erase a word); escape sequences (arrows) are ignored.
func (k *keyboard) take(data []byte) (line string, done bool) {
	for i := 0; i < len(data); i++ {
		b := data[i]
		switch {
		case b == '\r' || b == '\n':
			line, k.line = string(k.line), nil
			// What was typed after Enter is dropped: an answer is never
			// taken from keys pressed before its question was shown.
			return line, true
		case b == 0x7f || b == 0x08:
			if len(k.line) > 0 {
				_, size := utf8.DecodeLastRune(k.line)
				k.line = k.line[:len(k.line)-size]
			}
		case b == 0x15:
			k.line = nil
		case b == 0x17:
			s := strings.TrimRight(string(k.line), " ")
			if i := strings.LastIndexByte(s, ' '); i >= 0 {
				k.line = []byte(s[:i+1])
			} else {
				k.line = nil
			}
		case b == 0x1b:
			// ESC [ params final, or ESC O x: skip the sequence.
			if i+1 < len(data) && (data[i+1] == '[' || data[i+1] == 'O') {
				i += 2
				for i < len(data) && (data[i] < 0x40 || data[i] > 0x7e) {
					i++
				}
			}
		case b < 0x20:
			// Other control keys do nothing.
		default:
			k.line = append(k.line, b)
		}
	}
	return "", false
}

// reset forgets what was typed: a prompt closed by something else.
func (k *keyboard) reset() {
	k.line, k.lines = nil, nil
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := getTermios(f)
	return err == nil
}
