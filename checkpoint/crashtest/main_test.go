package crashtest

import (
	"testing"

	"github.com/tollgate-ai/tollgate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
