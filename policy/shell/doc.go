// Package shell reads a shell command string the way a policy needs to: as
// every simple command it would run, with the reasons a person must look at
// it when a static reading cannot tell.
//
// A prefix test ("the command starts with ls") lets "ls; rm -rf ~" through.
// [Parse] parses the string with mvdan.cc/sh and collects every command
// across lists (; && || &), pipelines (| |&), subshells and groups, command
// and process substitution ($(...), `...`, <(...), >(...)), here-documents,
// assignments, function bodies and if/while/for/case bodies. Each
// [Command] has its name with quotes and escapes removed (r'm', \rm and
// /bin/rm are all "rm"), its arguments, its redirections and whether they
// write files.
//
// It looks through what commands launch:
//   - wrappers (sudo, doas, env, nice, nohup, timeout, stdbuf, xargs,
//     command, exec, builtin, time, busybox, chroot, flock, watch, su, ...):
//     the wrapper is a command, and so is the command it runs;
//   - shells given a string (bash -c, sh -c, zsh -c, a here-document fed to
//     a shell, eval with literal words, env -S): the string is parsed again,
//     up to [DefaultMaxDepth] levels;
//   - find -exec/-execdir/-ok: the command is collected.
//
// What it cannot vouch for is a reason for review on the command or the
// [Analysis], and a caller should then ask a person and never allow: a
// string that does not parse, eval and source, a shell reading a script or
// its standard input, a command name computed at run time ($x, $(...), a
// glob), function definitions, variables that change how programs run
// (PATH, IFS, LD_PRELOAD, GIT_*, PAGER, ...), arithmetic on variables
// (bash evaluates array subscripts there, which can run commands),
// invisible or non-ASCII characters in names, and options of usually
// read-only commands that run programs or write files: find -delete and
// -fprint, git -c, --exec-path, -C and --output, sed -i and its e and w
// commands, awk system(), pipes and redirections, sort -o and
// --compress-program, tar --to-command and --checkpoint-action, less +cmd,
// man -P, rg --pre, git -p, --ext-diff and --textconv, date with a time
// operand, and more; and options it does not know of the commands whose
// whole option set it models (ls, cat, head, tail, wc, cut, grep, sed,
// sort, uniq, diff, join, column, date, jq). For such commands an argument only known at
// run time, a glob that may expand to "-option", or arguments xargs adds
// also need review. So do a redirection to or from a name computed at run
// time that could be /dev/tcp/..., and input beyond the limits (nesting,
// wrappers around one command, words after brace expansion).
//
// Beside what runs, each command says which files it names
// ([Command.Files]), which of them may lie outside the working directory
// ([Command.Outside]: absolute, ~, .., computed, or arguments from xargs),
// and what may hold secrets ([Command.Secrets]: files named like
// credentials, the environment, variables such as $API_KEY). These are
// not reasons for review: a policy decides whether reading outside the
// working directory needs a person.
//
// [Analysis.Effects] says what the string would do, in words a reviewer
// reads before approving it: each file it deletes or writes, the hosts it
// connects to, code it downloads and runs (curl URL | sh, bash -c
// "$(curl URL)", npm install), what it reads outside the working
// directory or that may hold credentials, what it does to git history,
// and which programs it runs whose effects it does not know; [RiskOf]
// rates them low, medium or high. Effects decide nothing: the policy
// does.
//
// The analysis is static and errs on the side of review. It reads bash by
// default; see [Parser] for other dialects and limits.
package shell
