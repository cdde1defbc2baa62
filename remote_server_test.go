package kvik_test

import (
	"testing"

	"github.com/kvikgo/kvik"
)

// smallTasks sets a small task size so that reads span many requests.
func smallTasks(t testing.TB, taskSize int) {
	t.Helper()
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize = taskSize })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
}
