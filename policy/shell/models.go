package shell

import "strings"

// optModel is the whole option set of a program, so that an option the
// analysis does not know is asked rather than guessed at: it might take
// the next word (hiding a file operand from the checks) or write files.
// short is written as for getopt: a letter followed by ':' takes a value,
// by "::" one only when attached (-Iseconds).
// long lists names without dashes; "name=" takes a value, "name=?" takes
// one only when attached (--group=separate), as GNU's optional values
// do.
type optModel struct {
	short string
	long  []string
	// digits: -NUM is an option (head -5, tail -20).
	digits bool
}

// spec returns the optSpec that finds the model's option values.
func (m optModel) spec() optSpec {
	var s optSpec
	for i := 0; i < len(m.short); i++ {
		switch {
		case strings.HasPrefix(m.short[i+1:], "::"):
			s.shortOptVal += m.short[i : i+1]
			i += 2
		case strings.HasPrefix(m.short[i+1:], ":"):
			s.shortVal += m.short[i : i+1]
			i++
		}
	}
	for _, l := range m.long {
		if name, ok := strings.CutSuffix(l, "="); ok {
			s.longVal = append(s.longVal, "--"+name)
		}
	}
	return s
}

// unknown reviews the options in opts that the model does not have.
func (m optModel) unknown(c *check, opts []opt) {
	for _, o := range opts {
		if !m.knows(o) {
			c.reviewf("has an option the analysis does not know (%s), which may take a value or write files", o.name)
		}
	}
}

func (m optModel) knows(o opt) bool {
	if len(o.name) == 2 {
		if m.digits && '0' <= o.name[1] && o.name[1] <= '9' {
			return true
		}
		i := strings.IndexByte(m.short, o.name[1])
		return i >= 0 && o.name[1] != ':'
	}
	name := strings.TrimPrefix(o.name, "--")
	for _, l := range m.long {
		full, _, _ := strings.Cut(l, "=")
		if strings.HasPrefix(full, name) && (!o.attached || strings.Contains(l, "=")) {
			return true
		}
	}
	return false
}

// modelled checks a command's options against its model, then runs more
// checks (nil for none).
func modelled(m optModel, more func(*check, []opt, []word)) func(*check) {
	spec := m.spec()
	return func(c *check) {
		opts, operands, _ := spec.parse(c.args)
		m.unknown(c, opts)
		if more != nil {
			more(c, opts, operands)
		}
	}
}

// Models of the read-only commands whose option values were guessed
// wrongly before: optional values taken for the next word, flags taken to
// take one.
var (
	uniqModel = optModel{short: "cdDf:is:uzw:", long: []string{"count", "repeated", "all-repeated=?", "skip-fields=",
		"group=?", "ignore-case", "skip-chars=", "unique", "zero-terminated", "check-chars=", "help", "version"}}
	joinModel = optModel{short: "a:e:ij:o:t:v:1:2:z", long: []string{"ignore-case", "check-order", "nocheck-order",
		"header", "zero-terminated", "help", "version"}}
	columnModel = optModel{short: "tn:O:N:l:E:deH:R:T:W:LJr:i:p:c:o:s:xhV", long: []string{"table", "table-name=",
		"table-order=", "table-columns=", "table-columns-limit=", "table-noextreme=", "table-noheadings",
		"table-header-repeat", "table-hide=", "table-right=", "table-truncate=", "table-wrap=", "keep-empty-lines",
		"json", "tree=", "tree-id=", "tree-parent=", "output-width=", "output-separator=", "separator=", "fillrows",
		"help", "version"}}
	diffModel = optModel{short: "qscC:uU:enyW:pF:tTlrNx:X:S:iEZbwBI:aD:dv", long: []string{"normal", "brief",
		"report-identical-files", "context=?", "unified=?", "ed", "rcs", "side-by-side", "width=", "left-column",
		"suppress-common-lines", "show-c-function", "show-function-line=", "label=", "expand-tabs", "initial-tab",
		"tabsize=", "suppress-blank-empty", "paginate", "recursive", "no-dereference", "new-file",
		"unidirectional-new-file", "ignore-file-name-case", "no-ignore-file-name-case", "exclude=", "exclude-from=",
		"starting-file=", "from-file=", "to-file=", "ignore-case", "ignore-tab-expansion", "ignore-trailing-space",
		"ignore-space-change", "ignore-all-space", "ignore-blank-lines", "ignore-matching-lines=", "text",
		"strip-trailing-cr", "ifdef=", "old-group-format=", "new-group-format=", "unchanged-group-format=",
		"changed-group-format=", "line-format=", "old-line-format=", "new-line-format=", "unchanged-line-format=",
		"minimal", "horizon-lines=", "speed-large-files", "color=?", "palette=", "help", "version"}}
	catModel  = optModel{short: "AbeEnstTuv", long: []string{"show-all", "number-nonblank", "show-ends", "number", "squeeze-blank", "show-tabs", "show-nonprinting", "help", "version"}}
	headModel = optModel{short: "c:n:qvz", long: []string{"bytes=", "lines=", "quiet", "silent", "verbose", "zero-terminated", "help", "version"}, digits: true}
	tailModel = optModel{short: "c:fFn:qs:vz", long: []string{"bytes=", "follow=?", "lines=", "max-unchanged-stats=", "pid=", "quiet", "silent",
		"retry", "sleep-interval=", "verbose", "zero-terminated", "help", "version"}, digits: true}
	wcModel  = optModel{short: "cmlLw", long: []string{"bytes", "chars", "lines", "files0-from=", "max-line-length", "words", "total=", "help", "version"}}
	cutModel = optModel{short: "b:c:d:f:nsz", long: []string{"bytes=", "characters=", "delimiter=", "fields=", "complement", "only-delimited",
		"output-delimiter=", "zero-terminated", "help", "version"}}
	sortModel = optModel{short: "bdfgiMhnRrVcCk:mo:sS:t:T:uz", long: []string{"ignore-leading-blanks", "dictionary-order", "ignore-case",
		"general-numeric-sort", "ignore-nonprinting", "month-sort", "human-numeric-sort", "numeric-sort", "random-sort", "random-source=",
		"reverse", "sort=", "version-sort", "batch-size=", "check=?", "compress-program=", "debug", "files0-from=", "key=", "merge",
		"output=", "stable", "buffer-size=", "field-separator=", "temporary-directory=", "parallel=", "unique", "zero-terminated", "help", "version"}}
	lsModel = optModel{short: "aAbBcCdDfFgGhHiI:klLmnNopqQrRsStT:uUvw:xXZ1", long: []string{"all", "almost-all", "author", "escape",
		"block-size=", "ignore-backups", "color=?", "colour=?", "directory", "dired", "classify=?", "file-type", "format=", "full-time",
		"group-directories-first", "no-group", "human-readable", "si", "dereference-command-line",
		"dereference-command-line-symlink-to-dir", "hide=", "hyperlink=?", "indicator-style=", "inode", "ignore=", "kibibytes",
		"dereference", "numeric-uid-gid", "literal", "hide-control-chars", "show-control-chars", "quote-name", "quoting-style=",
		"reverse", "recursive", "size", "sort=", "time=", "time-style=", "tabsize=", "width=", "context", "zero", "help", "version"}}
	grepModel = optModel{short: "EFGPe:f:iywxzsvVm:bnHhoqaId:D:rRLlcTZB:A:C:U", long: []string{"extended-regexp", "fixed-strings",
		"basic-regexp", "perl-regexp", "regexp=", "file=", "ignore-case", "no-ignore-case", "word-regexp", "line-regexp", "null-data",
		"no-messages", "invert-match", "version", "help", "max-count=", "byte-offset", "line-number", "line-buffered",
		"with-filename", "no-filename", "label=", "only-matching", "quiet", "silent", "binary-files=", "text", "directories=",
		"devices=", "recursive", "dereference-recursive", "include=", "exclude=", "exclude-from=", "exclude-dir=",
		"files-without-match", "files-with-matches", "count", "initial-tab", "null", "before-context=", "after-context=",
		"context=", "group-separator=", "no-group-separator", "color=?", "colour=?", "binary"}, digits: true}
	sedModel = optModel{short: "ne:f:i::l:Ersuz", long: []string{"quiet", "silent", "debug", "expression=", "file=", "follow-symlinks",
		"in-place=?", "line-length=", "posix", "regexp-extended", "separate", "sandbox", "unbuffered", "null-data", "help", "version"}}
	dateModel = optModel{short: "d:f:I::Rr:s:u", long: []string{"date=", "debug", "file=", "iso-8601=?", "resolution",
		"rfc-email", "rfc-3339=", "reference=", "set=", "utc", "universal", "help", "version"}}
)

// checkDate reviews date setting the clock: -s, --set, or an operand
// that is not a +FORMAT (date MMDDhhmm sets the time).
func checkDate(c *check, opts []opt, operands []word) {
	for _, o := range opts {
		if o.is('s', "--set") {
			c.reviewf("sets the system clock (%s)", o.name)
		}
	}
	for _, op := range operands {
		if op.static && !strings.HasPrefix(op.val, "+") {
			c.review("sets the system clock (the time operand " + op.val + ")")
		}
	}
}

// checkUniq reviews uniq writing its output to its second operand.
func checkUniq(c *check, _ []opt, operands []word) {
	outputOperandN(c, operands, 1)
}
