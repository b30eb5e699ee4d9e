package main

import "context"

// contextFrom returns a context cancelled when stopCh closes (the signal handler's
// channel), as upstream's main wires its informers.
func contextFrom(stopCh <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
