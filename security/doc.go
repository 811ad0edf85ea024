// Package security holds regression tests of the gateway's perimeter that
// span several packages; docs/security.md lists them with the threat model
// and the tests that live next to the code they hold to account.
package security
