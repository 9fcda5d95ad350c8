package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

func init() {
	register("completion", "print a shell completion script", nil,
		subcommand{name: "bash", summary: "print the bash completion script", run: completionCmd("bash", completionBashHelp, writeBash)},
		subcommand{name: "zsh", summary: "print the zsh completion script", run: completionCmd("zsh", completionZshHelp, writeZsh)},
		subcommand{name: "fish", summary: "print the fish completion script", run: completionCmd("fish", completionFishHelp, writeFish)})
}

const completionBashHelp = `usage: tollgate completion bash

Prints a bash completion script for tollgate: its commands, their
subcommands and their flags, as this binary has them (print it again
after an upgrade). Source it in the current shell, or install it for
every new one (bash-completion loads it from there).

examples:
  source <(tollgate completion bash)
  tollgate completion bash > ~/.local/share/bash-completion/completions/tollgate
`

const completionZshHelp = `usage: tollgate completion zsh

Prints a zsh completion script for tollgate: its commands, their
subcommands and their flags with what each does, as this binary has them
(print it again after an upgrade). Source it after compinit, or install
it as _tollgate in a directory of $fpath.

examples:
  source <(tollgate completion zsh)
  tollgate completion zsh > "${fpath[1]}/_tollgate"
`

const completionFishHelp = `usage: tollgate completion fish

Prints a fish completion script for tollgate: its commands, their
subcommands and their flags with what each does, as this binary has them
(print it again after an upgrade).

examples:
  tollgate completion fish | source
  tollgate completion fish > ~/.config/fish/completions/tollgate.fish
`

func completionCmd(shell, help string, write func(io.Writer, []compNode)) runFunc {
	return func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		fs := newFlagSet("completion "+shell, help, stderr)
		if code, done := parseFlagsOnly(fs, args, stdout); done {
			return code
		}
		write(stdout, completionTree(ctx))
		return 0
	}
}

// compNode is a place on the command line: tollgate itself (path ""), a
// command ("serve"), a subcommand ("policy test"), or the argument of
// help ("help", "help policy").
type compNode struct {
	path  string
	words []compWord // what may come next: subcommands, or commands after help
	flags []compFlag
}

type compWord struct{ name, summary string }

type compFlag struct {
	name    string // as typed: -v, --store
	value   bool   // takes a value: the next word is not a command
	summary string
}

// completionTree gathers the places from the registry, and each place's
// flags by running its command with --help (see flagCapture): a new
// command, subcommand or flag is completed without a word here.
func completionTree(ctx context.Context) []compNode {
	helpFlag := compFlag{name: "--help", summary: "print the help"}
	root := compNode{flags: []compFlag{helpFlag, {name: "--version", summary: "print the version"}}}
	for _, name := range sortedCommandNames() {
		root.words = append(root.words, compWord{name, commands[name].summary})
	}
	nodes := []compNode{root}
	for _, name := range sortedCommandNames() {
		c := commands[name]
		node := compNode{path: name, flags: append(compFlags(commandFlags(ctx, c)), helpFlag)}
		if name == "help" {
			node.words = root.words
		}
		for _, s := range c.subcommands {
			node.words = append(node.words, compWord{s.name, s.summary})
			nodes = append(nodes, compNode{path: name + " " + s.name, flags: append(compFlags(commandFlags(ctx, c, s.name)), helpFlag)})
		}
		nodes = append(nodes, node)
		if len(c.subcommands) > 0 {
			nodes = append(nodes, compNode{path: "help " + name, words: node.words, flags: []compFlag{helpFlag}})
		}
	}
	return nodes
}

func compFlags(fs *flagSet) []compFlag {
	if fs == nil {
		return nil
	}
	var out []compFlag
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "help" || f.Name == "h" {
			return
		}
		_, usage := flag.UnquoteUsage(f)
		out = append(out, compFlag{name: dashed(f.Name), value: !isBool(f), summary: shortUsage(usage)})
	})
	return out
}

// shortUsage is the start of a flag's usage, for a completion menu.
func shortUsage(u string) string {
	for _, sep := range []string{"; ", " (", ", e.g. ", " [", ": "} {
		if i := strings.Index(u, sep); i > 0 {
			u = u[:i]
		}
	}
	if len(u) > 70 {
		u = u[:67] + "..."
	}
	return u
}

func (n compNode) valueFlags() []string {
	var out []string
	for _, f := range n.flags {
		if f.value {
			out = append(out, f.name)
		}
	}
	return out
}

func (n compNode) wordNames() []string {
	out := make([]string, len(n.words))
	for i, w := range n.words {
		out[i] = w.name
	}
	return out
}

func (n compNode) flagNames() []string {
	out := make([]string, len(n.flags))
	for i, f := range n.flags {
		out[i] = f.name
	}
	return out
}

// shQuote quotes s for bash and zsh: in single quotes, each quote in s
// closed, escaped and reopened.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// fishQuote quotes s for fish: in single quotes, \ and ' escaped.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// shCase writes a case statement on $1 with one branch per node that has
// something to say; line gives a branch's body, "" for none.
func shCase(w io.Writer, nodes []compNode, line func(compNode) string) {
	fmt.Fprintln(w, `    case "$1" in`)
	for _, n := range nodes {
		if body := line(n); body != "" {
			fmt.Fprintf(w, "    %s) %s ;;\n", shQuote(n.path), body)
		}
	}
	fmt.Fprintln(w, "    esac")
}

func joinQuoted(words []string, quote func(string) string) string {
	q := make([]string, len(words))
	for i, s := range words {
		q[i] = quote(s)
	}
	return strings.Join(q, " ")
}

// The scripts walk the words before the cursor as tollgate does: a word
// that names a subcommand of where they are (or, after help, a command)
// moves on to it, a flag that takes a value skips the next word, any other
// word (a value, a task, a file) changes nothing.

func writeBash(w io.Writer, nodes []compNode) {
	fmt.Fprintf(w, `# bash completion for tollgate %s, generated by "tollgate completion bash".
# Load it with: source <(tollgate completion bash)

# _tollgate_words PLACE: the subcommands (or commands) that may follow.
_tollgate_words() {
`, version)
	shCase(w, nodes, func(n compNode) string {
		if len(n.words) == 0 {
			return ""
		}
		return "echo " + shQuote(strings.Join(n.wordNames(), " "))
	})
	fmt.Fprint(w, `}

# _tollgate_flags PLACE: the flags there.
_tollgate_flags() {
`)
	shCase(w, nodes, func(n compNode) string { return "echo " + shQuote(strings.Join(n.flagNames(), " ")) })
	fmt.Fprint(w, `}

# _tollgate_value_flags PLACE: the flags there that take a value.
_tollgate_value_flags() {
`)
	shCase(w, nodes, func(n compNode) string {
		if len(n.valueFlags()) == 0 {
			return ""
		}
		return "echo " + shQuote(strings.Join(n.valueFlags(), " "))
	})
	fmt.Fprint(w, `}

_tollgate() {
    local cur="${COMP_WORDS[COMP_CWORD]}" place="" word i skip=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        if ((skip)); then
            skip=0
            continue
        fi
        case "$word" in
        -*=*) ;;
        -*)
            case " $(_tollgate_value_flags "$place") " in
            *" $word "* | *" -$word "*) skip=1 ;;
            esac
            ;;
        *)
            case " $(_tollgate_words "$place") " in
            *" $word "*) place="${place:+$place }$word" ;;
            esac
            ;;
        esac
    done
    COMPREPLY=()
    if ((skip)); then
        return 0 # a flag's value: files, by -o default
    fi
    local IFS=$' \t\n'
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_tollgate_flags "$place")" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$(_tollgate_words "$place")" -- "$cur"))
    fi
}

complete -o default -F _tollgate tollgate
`)
}

func writeZsh(w io.Writer, nodes []compNode) {
	fmt.Fprintf(w, `#compdef tollgate
# zsh completion for tollgate %s, generated by "tollgate completion zsh".
# Load it with: source <(tollgate completion zsh), after compinit.

# _tollgate_words PLACE: the subcommands (or commands) that may follow, as name:summary.
_tollgate_words() {
`, version)
	zshCase(w, nodes, func(n compNode) []string { return zshDescribed(n.words) })
	fmt.Fprint(w, `}

# _tollgate_flags PLACE: the flags there, as name:summary.
_tollgate_flags() {
`)
	zshCase(w, nodes, func(n compNode) []string {
		ws := make([]compWord, len(n.flags))
		for i, f := range n.flags {
			ws[i] = compWord{f.name, f.summary}
		}
		return zshDescribed(ws)
	})
	fmt.Fprint(w, `}

# _tollgate_value_flags PLACE: the flags there that take a value.
_tollgate_value_flags() {
`)
	zshCase(w, nodes, func(n compNode) []string { return n.valueFlags() })
	fmt.Fprint(w, `}

_tollgate() {
  local place='' word i skip=0
  local -a reply
  for (( i = 2; i < CURRENT; i++ )); do
    word=${words[i]}
    if (( skip )); then
      skip=0
      continue
    fi
    case $word in
      -*=*) ;;
      -*)
        _tollgate_value_flags "$place"
        if (( ${reply[(Ie)$word]} || ${reply[(Ie)-$word]} )); then
          skip=1
        fi
        ;;
      *)
        _tollgate_words "$place"
        if (( ${reply[(I)${(b)word}:*]} )); then
          place=${place:+$place }$word
        fi
        ;;
    esac
  done
  if (( skip )); then
    _files
    return
  fi
  if [[ ${words[CURRENT]} == -* ]]; then
    _tollgate_flags "$place"
    _describe -t options flag reply
  else
    _tollgate_words "$place"
    if (( ${#reply} )); then
      _describe -t commands command reply
    else
      _files
    fi
  fi
}

if [ "$funcstack[1]" = "_tollgate" ]; then
  _tollgate "$@"
else
  compdef _tollgate tollgate
fi
`)
}

// zshDescribed writes words as _describe takes them: name:summary, a
// colon in the name escaped.
func zshDescribed(ws []compWord) []string {
	out := make([]string, len(ws))
	for i, x := range ws {
		out[i] = strings.ReplaceAll(x.name, ":", `\:`) + ":" + x.summary
	}
	return out
}

func zshCase(w io.Writer, nodes []compNode, items func(compNode) []string) {
	fmt.Fprintln(w, "  reply=()")
	fmt.Fprintln(w, "  case $1 in")
	for _, n := range nodes {
		if it := items(n); len(it) > 0 {
			fmt.Fprintf(w, "    %s) reply=(%s) ;;\n", shQuote(n.path), joinQuoted(it, shQuote))
		}
	}
	fmt.Fprintln(w, "  esac")
}

func writeFish(w io.Writer, nodes []compNode) {
	fmt.Fprintf(w, `# fish completion for tollgate %s, generated by "tollgate completion fish".
# Load it with: tollgate completion fish | source

# __tollgate_words PLACE: the subcommands (or commands) that may follow.
function __tollgate_words
    switch "$argv"
`, version)
	fishCase(w, nodes, func(n compNode) []string { return n.wordNames() })
	fmt.Fprint(w, `    end
end

# __tollgate_value_flags PLACE: the flags there that take a value.
function __tollgate_value_flags
    switch "$argv"
`)
	fishCase(w, nodes, func(n compNode) []string { return n.valueFlags() })
	fmt.Fprint(w, `    end
end

# __tollgate_place: where the words before the cursor lead.
function __tollgate_place
    set -l words (commandline -opc)
    set -e words[1]
    set -l place
    set -l skip 0
    for word in $words
        if test $skip = 1
            set skip 0
            continue
        end
        switch $word
            case '-*=*'
            case '-*'
                set -l values (__tollgate_value_flags $place)
                if contains -- $word $values; or contains -- -$word $values
                    set skip 1
                end
            case '*'
                if contains -- $word (__tollgate_words $place)
                    set -a place $word
                end
        end
    end
    echo "$place"
end

# __tollgate_at PLACE...: whether the cursor is there.
function __tollgate_at
    set -l place (__tollgate_place)
    test "$place" = "$argv"
end

`)
	for _, n := range nodes {
		cond := fishQuote(strings.TrimSpace("__tollgate_at " + n.path))
		for _, x := range n.words {
			fmt.Fprintf(w, "complete -c tollgate -n %s -f -a %s -d %s\n", cond, fishQuote(x.name), fishQuote(x.summary))
		}
		for _, f := range n.flags {
			opt := "-l " + fishQuote(strings.TrimPrefix(f.name, "--"))
			if !strings.HasPrefix(f.name, "--") {
				opt = "-s " + fishQuote(strings.TrimPrefix(f.name, "-"))
			}
			if f.value {
				opt += " -r"
			}
			fmt.Fprintf(w, "complete -c tollgate -n %s %s -d %s\n", cond, opt, fishQuote(f.summary))
		}
	}
}

func fishCase(w io.Writer, nodes []compNode, items func(compNode) []string) {
	for _, n := range nodes {
		if it := items(n); len(it) > 0 {
			fmt.Fprintf(w, "        case %s\n            printf '%%s\\n' %s\n", fishQuote(n.path), joinQuoted(it, fishQuote))
		}
	}
}
