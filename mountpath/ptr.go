package mountpath

import "unsafe"

// ptr is the address of the first element of a non-empty slice, for a
// raw system call.
func ptr(s []uint32) unsafe.Pointer { return unsafe.Pointer(&s[0]) }
