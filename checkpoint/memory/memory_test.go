package memory_test

import (
	"testing"

	"github.com/tollgate-ai/tollgate/checkpoint"
	"github.com/tollgate-ai/tollgate/checkpoint/checkpointtest"
	"github.com/tollgate-ai/tollgate/checkpoint/memory"
)

func TestConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store { return memory.New() })
}
