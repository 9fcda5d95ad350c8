package listsql

import (
	"strings"

	"github.com/tollgate-ai/tollgate/checkpoint"
)

// Rules is the statement of ListRules: the learned rules f selects, in
// creation order, as columns cols; ok is false when f selects none (an
// empty Scopes).
func Rules(d Dialect, cols string, f checkpoint.RuleFilter) (sql string, args []any, ok bool) {
	if f.Scopes != nil && len(f.Scopes) == 0 {
		return "", nil, false
	}
	q := &query{d: d}
	var w []string
	if f.Tool != "" {
		w = append(w, "tool = "+q.arg(f.Tool))
	}
	if f.Unrevoked {
		w = append(w, "revoked_at IS NULL")
	}
	if f.ThreadID != "" {
		w = append(w, "thread_id = "+q.arg(f.ThreadID))
	}
	if len(f.Scopes) > 0 {
		var or []string
		for _, sc := range f.Scopes {
			or = append(or, "(scope = "+q.arg(string(sc.Scope))+" AND scope_key = "+q.arg(sc.Key)+")")
		}
		w = append(w, "("+strings.Join(or, " OR ")+")")
	}
	sql = "SELECT " + cols + " FROM learned_rules"
	if len(w) > 0 {
		sql += " WHERE " + strings.Join(w, " AND ")
	}
	return sql + " ORDER BY seq", q.args, true
}
