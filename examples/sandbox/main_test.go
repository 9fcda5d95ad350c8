package main

func Example() {
	main()
	// Output:
	// == reviewer chooses approve ==
	// reviewer sees: bash "rm -r tmp-logs" (rule confirm, impact needs human review, 180s to answer)
	// meanwhile ls ran at once (policy: approve)
	// reviewer answers: approve
	// tool result call_ls: is_error=false {"exit_code":0,"stdout":"README.md\napp.go\ntmp-logs\n","stderr":""}
	// tool result call_rm: is_error=false {"exit_code":0,"stdout":"","stderr":""}
	// model: `ls`: ran, exit 0
	//        `rm -r tmp-logs`: ran, exit 0
	// tmp-logs now holds: []
	// == reviewer chooses deny ==
	// reviewer sees: bash "rm -r tmp-logs" (rule confirm, impact needs human review, 180s to answer)
	// meanwhile ls ran at once (policy: approve)
	// reviewer answers: deny
	// tool result call_ls: is_error=false {"exit_code":0,"stdout":"README.md\napp.go\ntmp-logs\n","stderr":""}
	// tool result call_rm: is_error=true keep the logs until the audit
	//     hitl trace: decision=human_deny reason=keep the logs until the audit
	// model: `ls`: ran, exit 0
	//        `rm -r tmp-logs`: denied: keep the logs until the audit
	// tmp-logs now holds: [new.log old.log]
	// == reviewer chooses edit ==
	// reviewer sees: bash "rm -r tmp-logs" (rule confirm, impact needs human review, 180s to answer)
	// meanwhile ls ran at once (policy: approve)
	// reviewer answers: edit
	// tool result call_ls: is_error=false {"exit_code":0,"stdout":"README.md\napp.go\ntmp-logs\n","stderr":""}
	// tool result call_rm: is_error=false {"exit_code":0,"stdout":"","stderr":""}
	//     hitl trace: decision=edit edited_args=map[cmd:rm tmp-logs/old.log] original_args=map[cmd:rm -r tmp-logs]
	// model: `ls`: ran, exit 0
	//        `rm tmp-logs/old.log` (edited from `rm -r tmp-logs`): ran, exit 0
	// tmp-logs now holds: [new.log]
}
