package tensorload

import (
	"context"
	"slices"

	"golang.org/x/sync/errgroup"
)

// Shards loads a sharded checkpoint's shards all at once: for each of
// files, load gets the names that weightMap (an index's weight_map) maps
// to it, sorted, those in want only when want is not empty; a file with
// none is not loaded. The first load to fail cancels the others and is
// the error, not the cancellations it caused; what did load is returned
// beside it, by file (the zero M where none), for the caller to free.
func Shards[M any](ctx context.Context, files []string, weightMap map[string]string, want map[string]bool,
	load func(ctx context.Context, file string, names []string) (M, error)) ([]M, error) {
	out := make([]M, len(files))
	g, gctx := errgroup.WithContext(ctx)
	for i, file := range files {
		var names []string
		for n, f := range weightMap {
			if f == file && (len(want) == 0 || want[n]) {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		g.Go(func() (err error) {
			out[i], err = load(gctx, file, names)
			return err
		})
	}
	return out, g.Wait()
}
