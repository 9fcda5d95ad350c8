// Package apiclient is the Go client of tollgate serve's HTTP API
// (server/API.md) and the owner of the API's wire types: [Question],
// [Thread], [Event], [Rule], [Delivery], [ErrorBody], with [Time] and
// [RawJSON] for the API's times and stored JSON. The server encodes its
// responses with these same types and [Client] decodes them, so the two
// cannot drift apart; the command line (tollgate questions, threads,
// audit, rules --server) and the tests use them too.
//
// Why a package of its own, at the top of the module, rather than
// server/client: a program that talks to a server should not build the
// server (its host, cluster and stores), and "client" is already the name
// of hooks/client, the coding agents' command hook — which stays apart:
// it imports only the standard library so that the process an agent
// starts for every tool call starts fast, and it speaks one route
// (POST /v1/hooks/AGENT) whose bodies are the agents' own formats.
//
// [Client]'s methods return the records of package checkpoint
// ([checkpoint.Question], [checkpoint.Event], ...), the same a store
// gives, so a program reads a server and a store alike. A refused request
// is an *[Error] with the API's code; a missing question or thread wraps
// [checkpoint.ErrNotFound].
//
// Quick start, a reviewer answering the oldest pending question:
//
//	c, _ := apiclient.New("http://127.0.0.1:8080", os.Getenv("TOLLGATE_TOKEN"), nil)
//	qs, _ := c.Questions(ctx, apiclient.QuestionQuery{Status: checkpoint.QuestionPending})
//	q := qs[0]
//	// The answer carries the digest of the call the reviewer saw.
//	_, err := c.Answer(ctx, q.ThreadID, q.ID, json.RawMessage(`{"decision":"approve","digest":"`+q.Digest+`"}`))
//	var refused *apiclient.Error
//	if errors.As(err, &refused) && refused.Code == "already_answered" {
//		fmt.Println("answered first by", refused.Question.AnsweredBy)
//	}
//
// Routes without a method of their own are reached with [Client.Do].
package apiclient
