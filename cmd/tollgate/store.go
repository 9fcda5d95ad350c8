package main

// defaultStore is where tollgate serve keeps its store when neither
// --store nor TOLLGATE_STORE says otherwise: a file in the directory it
// starts in.
const defaultStore = "sqlite:tollgate.db"

// storeFlag defines --store, the store a command uses; its default is
// $TOLLGATE_STORE, else def: defaultStore for serve and for the commands
// that read what serve wrote, "memory" for run. Open what it names with
// storeurl.Open in a command that creates the store, with
// storeurl.OpenReadOnly in one that only reads (it never writes, nor
// migrates), and with storeurl.OpenExisting in one that answers or
// aborts.
func storeFlag(fs flagDefiner, def string) *string {
	kinds := "sqlite:PATH or postgres://USER@HOST/DB"
	if def == "memory" {
		kinds = "memory (nothing is kept), " + kinds
	}
	p := new(string)
	fs.StringVar(p, "store", envDefault("TOLLGATE_STORE", def),
		"the store `URL`, where threads and questions live: "+kinds+", e.g. --store sqlite:tollgate.db or --store postgres://tollgate@db.internal/tollgate [TOLLGATE_STORE]")
	return p
}
