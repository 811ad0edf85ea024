package oauthclient

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// Source says where a client secret or a private key is read: exactly one
// of File and Env. It is read at every token request (a cache miss, never a
// cached call), so a rotated file or variable is used from the next request
// on without a restart or a signal.
type Source struct {
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
}

// maxSourceBytes bounds a secret or key file.
const maxSourceBytes = 64 << 10

// Check returns an error unless exactly one of File and Env is set.
func (s Source) Check() error {
	switch {
	case s.File == "" && s.Env == "":
		return errors.New("one of file and env is required")
	case s.File != "" && s.Env != "":
		return errors.New("file and env are exclusive")
	}
	return nil
}

// String names the source, never its value.
func (s Source) String() string {
	if s.Env != "" {
		return "env " + s.Env
	}
	return "file " + s.File
}

// read returns the source's bytes, trailing line breaks removed.
func (s Source) read() ([]byte, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	var b []byte
	if s.Env != "" {
		v, ok := os.LookupEnv(s.Env)
		if !ok {
			return nil, fmt.Errorf("environment variable %s is not set", s.Env)
		}
		b = []byte(v)
	} else {
		f, err := os.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", s.File, err)
		}
		if len(f) > maxSourceBytes {
			return nil, fmt.Errorf("%s is larger than %d bytes", s.File, maxSourceBytes)
		}
		b = f
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: empty value", s)
	}
	return b, nil
}

// Secret reads a client secret: one line of printable text.
func (s Source) Secret() (string, error) {
	b, err := s.read()
	if err != nil {
		return "", err
	}
	v := string(b)
	if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", fmt.Errorf("%s: the secret contains control characters or line breaks", s)
	}
	return v, nil
}

// keySource reads a PEM private key from a Source and keeps the parsed key
// until the bytes change: a read compares the content, parsing happens
// only after a rotation. The last parse is swapped atomically.
type keySource struct {
	src  Source
	last atomic.Pointer[parsedKey]
}

type parsedKey struct {
	pem []byte
	key crypto.Signer
}

func (k *keySource) signer() (crypto.Signer, error) {
	b, err := k.src.read()
	if err != nil {
		return nil, err
	}
	if p := k.last.Load(); p != nil && bytes.Equal(p.pem, b) {
		return p.key, nil
	}
	key, err := parsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.src, err)
	}
	k.last.Store(&parsedKey{pem: b, key: key})
	return key, nil
}

// parsePrivateKey reads the first PEM block: PKCS#8, PKCS#1 (RSA) or SEC 1
// (EC).
func parsePrivateKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	var key any
	var err error
	switch blk.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key", blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("unsupported private key type %T", key)
}
