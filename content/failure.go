package content

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// After a failure, two bounded memories keep a dead server from costing
// every read its timeouts and retries, and neither keeps a read from the
// server once it is back:
//
//   - The failure memory (failures): each read that got an error from a
//     load may have its one re-read answered with that error at once,
//     within Config.FailTTL — the kernel re-reads at once what a failed
//     readahead left, and that re-read should not pay the timeouts again.
//     It answers as many re-reads as reads failed, never more: any other
//     read (a new process, a second cat) asks the source again, so the
//     first read once the server is back succeeds.
//   - The outage (outage): while the collection's source keeps failing —
//     its last attempt failed with a temporary error (unreachable, timed
//     out, 5xx), within outageFor — a load makes one attempt instead of
//     1+Retries, without backoff: a grep -r over a dead server fails file
//     after file in milliseconds, not seconds. It still asks the server
//     every time, and its first answer (any answer: back-pressure and
//     refusals are answers too) ends the outage.

// outageFor is how long after the source's last failed attempt a load
// makes a single attempt.
const outageFor = 5 * time.Second

// failures remembers failed loads by flight key.
type failures struct {
	mu sync.Mutex // protects m
	m  map[string]*failure
}

type failure struct {
	at      time.Time // the last failed read
	err     error
	rereads int // re-reads it may still answer: one per read that failed
}

// answer returns the remembered error of key when a failed read may have
// its re-read answered from memory, spending that re-read; nil: ask the
// source.
func (f *failures) answer(key string, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.m[key]
	if !ok {
		return nil
	}
	if time.Since(fl.at) >= ttl {
		delete(f.m, key)
		return nil
	}
	if fl.rereads--; fl.rereads <= 0 {
		delete(f.m, key)
	}
	return fl.err
}

// failed records that a read of key got err: its re-read may be answered
// with it.
func (f *failures) failed(key string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*failure{}
	}
	fl, ok := f.m[key]
	if !ok {
		fl = &failure{}
		f.m[key] = fl
	}
	fl.at, fl.err = time.Now(), err
	fl.rereads++
}

// outage remembers when the source's last attempt failed (0: it answered).
type outage struct{ last atomic.Int64 }

// on reports whether the source is failing: a load then makes one attempt.
func (o *outage) on() bool {
	if o == nil {
		return false
	}
	last := o.last.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < outageFor
}

// note records the outcome of one attempt.
func (o *outage) note(err error) {
	if o == nil {
		return
	}
	if errors.Is(err, ErrTemporary) && !errors.Is(err, ErrBusy) {
		o.last.Store(time.Now().UnixNano())
	} else if o.last.Load() != 0 {
		o.last.Store(0)
	}
}
