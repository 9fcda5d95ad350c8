package policy

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tollgate-ai/tollgate/policy/shell"
)

// This file holds the shell analyses decisions read, and the cache that
// keeps them, so that a command string decided again is not analysed
// again.

// analysis is a shell analysis with what every decision on it needs.
type analysis struct {
	*shell.Analysis
	sizes []int // each command's size (sizeOf), which chooses how conditions run
	// strs holds each command as a string, made when a decision first
	// needs one (CEL helpers never do); strsDone says they are made.
	strs     []string
	strsDone atomic.Bool
	strsMu   sync.Mutex
	// memo holds, per command and rule, the result of conditions that read
	// only the command (0: not known, 1: false, 2: true): they are pure,
	// and the analysis is decided again whenever the string comes back.
	memo    []atomic.Uint32
	rules   int
	reasons []string // every reason for review
	reason  string   // the reasons joined
	weight  int      // roughly the bytes it holds, for the cache

	effectsOnce sync.Once
	effectList  []shell.Effect // made when an ask or an explanation first needs them
}

// effects returns the analysis's effects, made once.
func (a *analysis) effects() []shell.Effect {
	a.effectsOnce.Do(func() { a.effectList = a.Effects() })
	return a.effectList
}

func newAnalysis(src string, rules int) *analysis {
	a, _ := shell.Parse(src) // a parse error is one of a's reasons for review
	x := &analysis{Analysis: a, sizes: make([]int, len(a.Commands)), reasons: a.Reasons()}
	x.weight = len(src) + 64
	for i := range a.Commands {
		c := &a.Commands[i]
		x.sizes[i] = commandSize(c)
		x.weight += commandWeight(c)
	}
	x.reason = strings.Join(x.reasons, "; ")
	x.weight += len(x.reason) + 16*len(x.reasons)
	if rules > 0 {
		x.memo, x.rules = make([]atomic.Uint32, len(a.Commands)*rules), rules
		x.weight += 4 * len(x.memo)
	}
	return x
}

// str returns command i as a string; "" for a == nil, the call itself.
func (a *analysis) str(i int) string {
	if a == nil {
		return ""
	}
	if !a.strsDone.Load() {
		a.makeStrs()
	}
	return a.strs[i]
}

func (a *analysis) makeStrs() {
	a.strsMu.Lock()
	defer a.strsMu.Unlock()
	if a.strsDone.Load() {
		return
	}
	strs := make([]string, len(a.Commands))
	for i := range a.Commands {
		strs[i] = a.Commands[i].String()
	}
	a.strs = strs
	a.strsDone.Store(true)
}

// commandWeight is roughly the bytes a command holds, twice over for its
// string.
func commandWeight(c *shell.Command) int {
	n := 256 + len(c.Path)
	for _, l := range [][]string{c.Args, c.Env, c.Via, c.Review, c.Files, c.Outside, c.Unknown, c.Secrets} {
		for _, s := range l {
			n += 16 + 2*len(s)
		}
	}
	for _, r := range c.Redirects {
		n += 64 + 2*len(r.Target)
	}
	return n
}

// memoSlot returns the memo of a rule on command i, or nil.
func (a *analysis) memoSlot(i, rule int) *atomic.Uint32 {
	if a.memo == nil {
		return nil
	}
	return &a.memo[i*a.rules+rule]
}

// analysisCache keeps recent shell analyses: the same command string is
// often decided again (a retried call, an edit checked twice, a test
// suite). Analyses are never modified after they are made, except for
// their memos and strings, made once. An analysis heavier than
// maxCachedWeight is not kept, and the cache empties when what it keeps
// would weigh more than maxCacheWeight: hostile strings cost their
// analysis once, not memory for as long as they stay.
type analysisCache struct {
	rules  int // the policy's rules, for the memos; set once at load
	mu     sync.Mutex
	max    int
	m      map[string]*analysis
	weight int // of the analyses kept
	budget int // maxCacheWeight, but for tests
}

// Bounds on what the analysis cache keeps, in bytes (roughly).
const (
	maxCachedWeight = 64 << 10
	maxCacheWeight  = 16 << 20
)

func newAnalysisCache(max int) *analysisCache {
	return &analysisCache{max: max, m: make(map[string]*analysis), budget: maxCacheWeight}
}

func (c *analysisCache) analyze(src string) *analysis {
	if c.max <= 0 {
		return newAnalysis(src, 0)
	}
	c.mu.Lock()
	a, ok := c.m[src]
	c.mu.Unlock()
	if ok {
		return a
	}
	a = newAnalysis(src, c.rules)
	if a.weight > maxCachedWeight {
		return a
	}
	c.mu.Lock()
	if len(c.m) >= c.max || c.weight+a.weight > c.budget {
		clear(c.m)
		c.weight = 0
	}
	if _, dup := c.m[src]; !dup {
		c.m[src] = a
		c.weight += a.weight
	}
	c.mu.Unlock()
	return a
}
