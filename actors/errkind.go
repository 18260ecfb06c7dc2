package actors

import "lazy/errkind"

// ErrorKind is errkind.Busy.
func (e *BusyError) ErrorKind() errkind.Kind { return errkind.Busy }
