// Package nearest finds the name a person probably meant when they typed
// one that does not exist: a command, a flag, a store's kind.
package nearest

// Name returns the name among names nearest to a mistyped one (at most two
// edits away, or one for a name of three letters or fewer; with prefix, a
// name that typed begins, from three letters on, counts as one edit), or
// "".
func Name(typed string, names []string, prefix bool) string {
	best, bestDist := "", 3
	if len(typed) <= 3 {
		bestDist = 2
	}
	for _, n := range names {
		d := Distance(typed, n)
		if prefix && len(typed) >= 3 && len(n) > len(typed) && n[:len(typed)] == typed {
			d = 1 // a prefix: "ser" for serve
		}
		if d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// Distance is the Levenshtein distance of a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
