// Package config holds the value types the toolmesh config file and the
// Portal's documents share: durations written as Go duration strings and the
// sources credentials are read from.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("1s", "250ms")
// in JSON and YAML.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON implements [json.Marshaler].
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements [json.Unmarshaler]. It accepts a duration string;
// a bare number is rejected because its unit would be a guess.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"1s\": %s", b)
	}
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: negative", s)
	}
	*d = Duration(v)
	return nil
}

// credentialName is the shape of a credential name.
var credentialName = regexp.MustCompile(CredentialNamePattern)

// CredentialNamePattern is the shape of a credential name (and of an
// embedding service's name, which the same map-key rules apply to).
const CredentialNamePattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`

// ValidCredentialName reports whether name matches CredentialNamePattern.
func ValidCredentialName(name string) bool { return credentialName.MatchString(name) }

// ValidHeaderText reports whether s may be (part of) an HTTP header value:
// no control characters (CR, LF and NUL included) but tab.
func ValidHeaderText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// CredentialSource says where the value of one credential is read: exactly
// one of File (the file's content, without trailing line breaks) and Env (an
// environment variable). It is read at every listing, so a rotated secret
// is used from the next refresh on.
type CredentialSource struct {
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
}

// Check returns an error when the source is not exactly one of file and env.
func (c CredentialSource) Check() error {
	switch {
	case c.File == "" && c.Env == "":
		return errors.New("one of file and env is required")
	case c.File != "" && c.Env != "":
		return errors.New("file and env are exclusive")
	}
	return nil
}

// maxCredentialBytes bounds a credential file read.
const maxCredentialBytes = 64 << 10

// Read returns the credential's value.
func (c CredentialSource) Read() (string, error) {
	if err := c.Check(); err != nil {
		return "", err
	}
	var v string
	if c.Env != "" {
		val, ok := os.LookupEnv(c.Env)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", c.Env)
		}
		v = val
	} else {
		b, err := os.ReadFile(c.File)
		if err != nil {
			return "", fmt.Errorf("read credential file: %w", err)
		}
		if len(b) > maxCredentialBytes {
			return "", fmt.Errorf("credential file %s is larger than %d bytes", c.File, maxCredentialBytes)
		}
		v = strings.TrimRight(string(b), "\r\n")
	}
	if v == "" {
		return "", errors.New("empty value")
	}
	if !ValidHeaderText(v) {
		return "", errors.New("value contains control characters or line breaks")
	}
	return v, nil
}

// CheckCredentials checks the toolmesh config file's credentials map:
// every name well formed, every source exactly one of file and env.
func CheckCredentials(creds map[string]CredentialSource) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(creds)) {
		if !credentialName.MatchString(name) {
			errs = append(errs, fmt.Errorf("credentials.%s: name must match %s", name, credentialName))
		}
		if err := creds[name].Check(); err != nil {
			errs = append(errs, fmt.Errorf("credentials.%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
