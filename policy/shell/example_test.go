package shell_test

import (
	"fmt"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

func ExampleParse() {
	a, err := shell.Parse(`ls -la; r''m -rf ~ && echo "$(whoami)" > /tmp/me`)
	if err != nil {
		panic(err)
	}
	for _, c := range a.Commands {
		fmt.Printf("%-6s args=%q writes=%v\n", c.Name, c.Args, c.Writes)
	}
	// Output:
	// ls     args=["-la"] writes=false
	// rm     args=["-rf" "~"] writes=false
	// whoami args=[] writes=false
	// echo   args=["\"$(whoami)\""] writes=true
}

func ExampleParse_wrappers() {
	a, _ := shell.Parse(`sudo env LANG=C bash -c 'find . -name "*.log" -exec rm {} +'`)
	for _, c := range a.Commands {
		fmt.Println(c.Name, c.Via)
	}
	// Output:
	// sudo []
	// env [sudo]
	// bash [sudo env]
	// find [sudo env bash -c]
	// rm [sudo env bash -c find -exec]
}

func ExampleAnalysis_Reasons() {
	a, _ := shell.Parse(`git -c core.pager='sh -c id' log; eval "$cmd"; find . -delete`)
	for _, r := range a.Reasons() {
		fmt.Println(r)
	}
	// Output:
	// git: uses the git option -c, which can run programs or change the repository and configuration git uses
	// eval: runs its arguments as shell code (eval)
	// find: deletes the files it finds (-delete)
}

func ExampleParse_unparsable() {
	a, err := shell.Parse(`ls; echo 'unterminated`)
	fmt.Println(err != nil, a.NeedsReview())
	// Output:
	// true true
}
