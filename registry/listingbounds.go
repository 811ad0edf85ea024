package registry

import (
	"fmt"
)

// ListingBounds bound one federated MCP server's listing, across all its
// pages (docs/contracts/portal.md, "Listing bounds"): how many tools,
// resources, resource templates and prompts it may list, and how many bytes
// of list results in all. A listing past one is refused as a whole; the
// last good one stays. A field left out (nil) is unset: the config file's
// default block, then the built-in default, applies. Pointers, so that an
// explicit 0 is an error, not a silent default.
type ListingBounds struct {
	Tools             *int64 `json:"tools,omitempty"`
	Resources         *int64 `json:"resources,omitempty"`
	ResourceTemplates *int64 `json:"resourceTemplates,omitempty"`
	Prompts           *int64 `json:"prompts,omitempty"`
	Bytes             *int64 `json:"bytes,omitempty"`
}

// Built-in listing bounds, and the ceilings a configured bound may not
// pass: a bound is there to keep one server from growing the gateway's
// memory, so it cannot be configured away.
const (
	DefaultListingItems = 10000
	DefaultListingBytes = 32 << 20
	MaxListingItems     = 100000
	MaxListingBytes     = 256 << 20
)

// Limits are listing bounds with every field set.
type Limits struct {
	Tools, Resources, ResourceTemplates, Prompts, Bytes int64
}

// DefaultLimits are the built-in bounds.
func DefaultLimits() Limits {
	return Limits{Tools: DefaultListingItems, Resources: DefaultListingItems,
		ResourceTemplates: DefaultListingItems, Prompts: DefaultListingItems, Bytes: DefaultListingBytes}
}

// fields pairs b's fields with base's, named as in the Portal and the
// config file.
func (b *ListingBounds) fields(base *Limits) []struct {
	name string
	set  *int64
	lim  *int64
	max  int64
} {
	if b == nil {
		b = &ListingBounds{}
	}
	return []struct {
		name string
		set  *int64
		lim  *int64
		max  int64
	}{
		{"tools", b.Tools, &base.Tools, MaxListingItems},
		{"resources", b.Resources, &base.Resources, MaxListingItems},
		{"resourceTemplates", b.ResourceTemplates, &base.ResourceTemplates, MaxListingItems},
		{"prompts", b.Prompts, &base.Prompts, MaxListingItems},
		{"bytes", b.Bytes, &base.Bytes, MaxListingBytes},
	}
}

// Over returns base with the fields b sets replaced (b may be nil).
func (b *ListingBounds) Over(base Limits) Limits {
	for _, f := range b.fields(&base) {
		if f.set != nil {
			*f.lim = *f.set
		}
	}
	return base
}

// Check returns a problem per set field that is not positive or is over
// its ceiling; each starts with prefix and the field's name
// ("listingBounds.tools").
func (b *ListingBounds) Check(prefix string) []error {
	var errs []error
	var l Limits
	for _, f := range b.fields(&l) {
		if f.set != nil && (*f.set < 1 || *f.set > f.max) {
			errs = append(errs, fmt.Errorf("%s.%s: %d is not between 1 and %d (leave it out for the default)", prefix, f.name, *f.set, f.max))
		}
	}
	return errs
}

// Equal reports whether a and b set the same bounds.
func (b *ListingBounds) Equal(o *ListingBounds) bool {
	var l Limits
	fa, fb := b.fields(&l), o.fields(&l)
	for i := range fa {
		if (fa[i].set == nil) != (fb[i].set == nil) || (fa[i].set != nil && *fa[i].set != *fb[i].set) {
			return false
		}
	}
	return true
}
