// Package parallel runs index-addressed work on a bounded number of
// goroutines; shared by the registry and its Redis store so both fan out
// the same way.
package parallel

import (
	"sync"
	"sync/atomic"
)

// ForEach runs fn(0..n-1) on at most workers goroutines and waits.
func ForEach(n, workers int, fn func(i int)) {
	workers = max(min(workers, n), 1)
	if workers == 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
