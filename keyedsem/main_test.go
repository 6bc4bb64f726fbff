package keyedsem_test

import (
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}
