// Package display is how the command line shows people what a tool call is
// and what happened to it: the `tollgate run` terminal, and the
// `questions`, `threads` and `audit` commands.
//
// What a person reads must be what is true:
//
//   - Text is shown as it is, except the characters a reader could not see
//     or that change how the text around them reads (controls, bidi
//     controls, zero-width and other invisible characters, invalid UTF-8):
//     [Text] shows each as ⟨U+XXXX⟩ (a byte of invalid UTF-8 as ⟨0xNN⟩),
//     the same set the reviewer page marks, and [Hidden] counts them so
//     that a caller can print a warning.
//   - Padding does not push the rest out of view: more than 16 blank
//     characters in a row read "⟨3000 spaces⟩", more than 3 blank lines
//     "⟨200 blank lines⟩" ([Text], [Line], and so [Args] and [Result]).
//   - JSON is shown without HTML escaping: `>>` reads as `>>`, never as
//     `\u003e\u003e`, also when the stored JSON has such escapes ([JSON],
//     [JSONIndent]); JSON given to a person to edit keeps the hidden
//     characters as \u escapes, so that they show and round-trip
//     ([EditJSON]).
//   - A call's arguments are shown as their text ([Args], [Summary]), a bash
//     result as its exit code, stdout and stderr ([Result]).
//   - What happened is said in words that keep the cases apart ([Outcome],
//     [Resolution]): "blocked by the policy (...)" is not "denied by NAME
//     (...)", which is not "timed out"; after an edit, what ran.
//
// Quick start, for a finished tool call:
//
//	for _, l := range display.Args(args) {
//		fmt.Println("  " + l)
//	}
//	if n := display.HiddenJSON(args); n > 0 {
//		fmt.Printf("  warning: %d hidden characters, shown as ⟨U+XXXX⟩\n", n)
//	}
//	fmt.Println(display.Outcome(res, q))
//	fmt.Println(display.Result(res))
//
// Phrases ([Outcome], [Resolution], [Summary]) are one line each: newlines
// and tabs inside them are shown as ⟨U+000A⟩ and ⟨U+0009⟩, so they fit a
// table cell or a status line. [Text], [Args], [Result] and [JSONIndent]
// keep newlines and tabs.
package display
