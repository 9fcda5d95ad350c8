package policy

import _ "embed"

//go:embed schema.json
var schema []byte

// Schema returns the JSON Schema of policy and test files, for editors
// (with the YAML language server, start a file with
// "# yaml-language-server: $schema=<path to schema.json>").
func Schema() []byte { return append([]byte(nil), schema...) }
