package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"lazy/errkind"
)

// UnavailableError is a store that did not answer: PostgreSQL stopped or
// out of reach. It says so and what to check, and carries errkind's
// Unavailable (a 503 on the web and over the RPC, kept across members), not
// an "internal error" that sends the operator to the daemon log.
type UnavailableError struct{ err error }

func (e *UnavailableError) Error() string {
	return "the store does not answer (" + e.err.Error() + "): check that PostgreSQL runs and this member reaches it (`lazy cluster status` shows the store); the request was not completed, try it again once the store answers"
}

func (e *UnavailableError) Unwrap() error { return e.err }

// ErrorKind is errkind.Unavailable.
func (e *UnavailableError) ErrorKind() errkind.Kind { return errkind.Unavailable }

// unavailable (in mapErr, which every method's error passes) wraps err when it says the store could not be reached or
// the connection broke; any other error is returned as it is.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	var u *UnavailableError
	if errors.As(err, &u) || !connectionFailed(err) {
		return err
	}
	return &UnavailableError{err: err}
}

func connectionFailed(err error) bool {
	var ce *pgconn.ConnectError
	var ne *net.OpError
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// class 08: connection exception; 57P01–57P03: the server shutting
		// down, crashed, or not yet taking connections
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	switch {
	case errors.As(err, &ce), errors.As(err, &ne),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	msg := err.Error()
	for _, s := range []string{"failed to connect", "conn closed", "connection refused", "the database system is shutting down", "the database system is starting up"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
