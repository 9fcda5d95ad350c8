package shell

import (
	"slices"
	"strings"
)

// This file holds the effects of commands that delete, write, copy or
// move files, change their modes, or pack and unpack archives.

func deleteEffect(c *Command, add addFunc, named map[string]bool) {
	ops, flags := operands(c.Args)
	g := given(c, ops)
	if len(ops) == 0 && g == "" {
		return
	}
	recursive := c.Name == "rm" && hasFlag(flags, 'r', "--recursive") || hasFlag(flags, 'R')
	s, objs := objects(ops)
	text := "deletes " + s
	risk := RiskMedium
	if g != "" {
		text, objs, risk = "deletes "+g, nil, RiskHigh
	}
	if recursive {
		text += " recursively"
		risk = RiskHigh
	}
	if anyOutside(ops) {
		text += " (outside the working directory)"
		risk = RiskHigh
	}
	if slices.ContainsFunc(ops, func(o string) bool { return strings.ContainsAny(o, "*?[") }) {
		text += " (every file the pattern matches)"
		risk = RiskHigh
	}
	add(EffectDelete, risk, text, objs)
	for _, o := range ops {
		named[o] = true
	}
}

func findEffect(c *Command, add addFunc, named map[string]bool) {
	if !slices.Contains(c.Args, "-delete") {
		return
	}
	var start []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "-") || a == "(" || a == "!" {
			break
		}
		start = append(start, a)
	}
	if len(start) == 0 {
		start = []string{"."}
	}
	s, objs := objects(start)
	add(EffectDelete, RiskHigh, "deletes every file find selects under "+s+" (find -delete)", objs)
	for _, o := range start {
		named[o] = true
	}
}

func writeOperands(c *Command, add addFunc, named map[string]bool) {
	ops, _ := operands(c.Args)
	if c.Name == "truncate" {
		ops = ops[:0:0]
		_, operands, _ := optSpec{shortVal: "sr", longVal: []string{"--size", "--reference"}}.parse(staticWords(c.Args))
		for _, o := range operands {
			ops = append(ops, o.val)
		}
	}
	if g := given(c, ops); g != "" {
		ops = []string{g}
	}
	if len(ops) == 0 {
		return
	}
	s, objs := objects(ops)
	verb := map[string]string{"mkdir": "creates the directory ", "truncate": "truncates ", "mkfifo": "creates the pipe ", "mknod": "creates the device "}[c.Name]
	if verb == "" {
		verb = "writes "
	}
	add(EffectWrite, maxRisk(ops), verb+s+outsideNote(ops), objs)
	for _, o := range ops {
		named[o] = true
	}
}

func copyEffect(c *Command, add addFunc, named map[string]bool) {
	spec := optSpec{shortVal: "tSTbm", longVal: []string{"--target-directory", "--suffix", "--backup", "--mode", "--owner", "--group", "--exclude", "--include", "--filter", "--rsh", "--rsync-path", "--port"}}
	if c.Name == "scp" {
		spec = optSpec{shortVal: "cFiJlmoPSDX"}
	}
	if c.Name == "rsync" {
		spec.shortVal = "efBTm"
	}
	opts, ops, _ := spec.parse(staticWords(c.Args))
	var names []string
	for _, o := range ops {
		names = append(names, o.val)
	}
	dest := ""
	for _, o := range opts {
		if o.is('t', "--target-directory") {
			dest = o.val
		}
	}
	if dest == "" && len(names) >= 2 {
		dest, names = names[len(names)-1], names[:len(names)-1]
	}
	if dest == "" || len(names) == 0 {
		return
	}
	var hosts []string
	for _, n := range append([]string{dest}, names...) {
		if h := remotePath(n); h != "" {
			hosts = append(hosts, h)
		}
	}
	s, objs := objects(names)
	flags := make([]string, 0, len(opts))
	for _, o := range opts {
		flags = append(flags, o.name)
	}
	switch {
	case len(hosts) > 0:
		hs, hobjs := objects(dedupe(hosts))
		add(EffectNetwork, RiskMedium, "copies "+s+" to "+dest+" over the network ("+hs+")", hobjs)
		if remotePath(dest) == "" {
			add(EffectWrite, riskOf(dest), "writes "+dest+where(dest), []string{dest})
		}
		if hasFlag(flags, 0, "--delete", "--delete-before", "--delete-after", "--delete-during", "--delete-excluded") {
			add(EffectDelete, RiskHigh, "deletes files in "+dest+" that "+s+" does not have (--delete)", []string{dest})
		}
	case c.Name == "mv":
		add(EffectWrite, maxRisk(append([]string{dest}, names...)), "moves "+s+" to "+dest+outsideNote(append([]string{dest}, names...)), append(objs, dest))
	case c.Name == "ln":
		add(EffectWrite, riskOf(dest), "creates the link "+dest+" to "+s+where(dest), []string{dest})
	default:
		how := ""
		if hasFlag(flags, 'r', "--recursive") || hasFlag(flags, 'R') || hasFlag(flags, 'a', "--archive") {
			how = " recursively"
		}
		add(EffectWrite, riskOf(dest), "copies "+s+how+" to "+dest+where(dest), []string{dest})
		if anyOutside(names) {
			add(EffectReadOutside, RiskMedium, "reads outside the working directory: "+s, objs)
		}
		if hasFlag(flags, 0, "--delete") {
			add(EffectDelete, RiskHigh, "deletes files in "+dest+" that "+s+" does not have (--delete)", []string{dest})
		}
	}
	for _, n := range append(names, dest) {
		named[n] = true
	}
}

func modeEffect(c *Command, add addFunc, named map[string]bool) {
	ops, flags := operands(c.Args)
	if len(ops) < 2 {
		return
	}
	what := map[string]string{"chmod": "the permissions", "chown": "the owner", "chgrp": "the group", "chattr": "the attributes", "setfacl": "the access lists"}[c.Name]
	files := ops[1:]
	if c.Name == "setfacl" {
		files = ops
	}
	s, objs := objects(files)
	text := "changes " + what + " of " + s
	risk := maxRisk(files)
	if hasFlag(flags, 'R', "--recursive") {
		text += " recursively"
		risk = RiskHigh
	}
	add(EffectWrite, risk, text+outsideNote(files), objs)
	for _, f := range files {
		named[f] = true
	}
}

func archiveEffect(c *Command, add addFunc, named map[string]bool) {
	ops, flags := operands(c.Args)
	switch c.Name {
	case "tar":
		if c.Writes {
			s, objs := objects(ops)
			verb := "creates or changes the archive, or extracts files: "
			if len(c.Args) > 0 && (hasFlag(flags, 'x', "--extract", "--get") || !strings.HasPrefix(c.Args[0], "-") && strings.Contains(c.Args[0], "x")) {
				verb = "extracts files from "
			}
			add(EffectWrite, RiskMedium, verb+s, objs)
		}
	case "unzip", "patch":
		s, objs := objects(ops)
		add(EffectWrite, RiskMedium, "writes the files of "+s, objs)
	default:
		if len(ops) == 0 || hasFlag(flags, 'c', "--stdout") || hasFlag(flags, 'l', "--list") || hasFlag(flags, 't', "--test") {
			return
		}
		s, objs := objects(ops)
		add(EffectWrite, maxRisk(ops), c.Name+" writes "+s+" (and may replace the originals)", objs)
	}
	for _, o := range ops {
		named[o] = true
	}
}
