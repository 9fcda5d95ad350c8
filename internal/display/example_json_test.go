package display_test

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate-ai/tollgate/internal/display"
)

// Arguments as json.Marshal stores them: >> is \u003e\u003e there. JSON
// shows what the command is.
func ExampleJSON() {
	stored := json.RawMessage(`{"cmd":"echo hi \u003e\u003e /etc/passwd","note":"\u202eok"}`)
	fmt.Println(display.JSON(stored))
	fmt.Println(display.HiddenJSON(stored), "hidden")
	// Output:
	// {"cmd":"echo hi >> /etc/passwd","note":"⟨U+202E⟩ok"}
	// 1 hidden
}

func ExampleJSONIndent() {
	fmt.Println(display.JSONIndent(map[string]any{"path": "/tmp/<x>", "lines": []int{1, 2}}))
	// Output:
	// {
	//   "lines": [
	//     1,
	//     2
	//   ],
	//   "path": "/tmp/<x>"
	// }
}

// The arguments a reviewer edits in $EDITOR: >> as it is, the hidden
// characters as escapes the editor shows.
func ExampleEditJSON() {
	s, _ := display.EditJSON(map[string]any{"cmd": "echo hi >> notes\u200b"})
	fmt.Println(s)
	// Output:
	// {
	//   "cmd": "echo hi >> notes\u200b"
	// }
}
