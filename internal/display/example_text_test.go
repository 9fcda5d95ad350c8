package display_test

import (
	"fmt"

	"github.com/tollgate-ai/tollgate/internal/display"
)

// A command that reads one way and runs another: the right-to-left
// override makes "evil" print backwards, the zero-width space and the
// escape sequence are not seen at all. Text shows them; > stays >.
func ExampleText() {
	cmd := "echo \"<script>\" >> /etc/passwd # \u202eevil\u202c \u200b \x1b[31m"
	fmt.Println(display.Text(cmd))
	if n := display.Hidden(cmd); n > 0 {
		fmt.Printf("warning: %d hidden characters, shown as ⟨U+XXXX⟩\n", n)
	}
	// Output:
	// echo "<script>" >> /etc/passwd # ⟨U+202E⟩evil⟨U+202C⟩ ⟨U+200B⟩ ⟨U+001B⟩[31m
	// warning: 4 hidden characters, shown as ⟨U+XXXX⟩
}

// Line keeps a table cell on one line.
func ExampleLine() {
	fmt.Printf("| %s |\n", display.Line("cat <<EOF > notes\n\thello\nEOF"))
	// Output:
	// | cat <<EOF > notes⟨U+000A⟩⟨U+0009⟩hello⟨U+000A⟩EOF |
}

func ExampleHidden() {
	fmt.Println(display.Hidden("ls -la"), display.Hidden("ls\u200b -la\xff"))
	// Output:
	// 0 2
}
