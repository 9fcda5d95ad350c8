package migrate

import (
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	got, err := Load(fstest.MapFS{
		"m/0002_more.sql": file("B"),
		"m/0001_init.sql": file("A"),
		"m/0010_ten.sql":  file("J"),
	}, "m", "sqlite")
	if err == nil || err.Error() != `sqlite: migration "0010_ten.sql": want version 3` {
		t.Fatalf("a gap in the versions: %v %v", got, err)
	}
	got, err = Load(fstest.MapFS{"m/0002_more.sql": file("B"), "m/0001_init.sql": file("A")}, "m", "sqlite")
	if err != nil || len(got) != 2 || got[0] != (Migration{1, "0001_init.sql", "A"}) || got[1] != (Migration{2, "0002_more.sql", "B"}) {
		t.Fatalf("two migrations: %v %v", got, err)
	}
	_, err = Load(fstest.MapFS{"m/init.sql": file("A")}, "m", "postgres")
	if err == nil || err.Error() != `postgres: migration "init.sql": name must start with a version number` {
		t.Fatalf("a name without a version: %v", err)
	}
}
