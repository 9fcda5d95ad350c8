package clock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-ai/tollgate/clock"
)

func TestFake(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	c1, _ := f.After(time.Minute)
	c2, stop2 := f.After(2 * time.Minute)
	now, _ := f.After(0)
	select {
	case <-now:
	default:
		t.Fatal("a zero wait did not fire at once")
	}
	if !f.WaitForWaiters(2, time.Second) || f.Waiters() != 2 {
		t.Fatalf("waiters %d", f.Waiters())
	}
	f.Advance(59 * time.Second)
	select {
	case <-c1:
		t.Fatal("fired early")
	default:
	}
	f.Advance(time.Second)
	if got := <-c1; !got.Equal(start.Add(time.Minute)) {
		t.Fatalf("fired at %v", got)
	}
	stop2()
	f.Advance(time.Hour)
	select {
	case <-c2:
		t.Fatal("a stopped timer fired")
	default:
	}
	if f.Waiters() != 0 || !f.Now().Equal(start.Add(time.Hour+time.Minute)) {
		t.Fatalf("waiters %d now %v", f.Waiters(), f.Now())
	}
	if f.WaitForWaiters(1, 10*time.Millisecond) {
		t.Fatal("WaitForWaiters reported a waiter that does not exist")
	}
}

func ExampleFake() {
	f := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	deadline, _ := f.After(3 * time.Minute)
	f.Advance(3 * time.Minute) // no sleeping: the deadline fires now
	fmt.Println((<-deadline).Format(time.Kitchen))
	// Output: 12:03PM
}
