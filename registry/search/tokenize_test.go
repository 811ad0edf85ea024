package search

import (
	"slices"
	"strings"
	"testing"
)

func TestIdentifierWords(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"dots", "crm.contacts.create", []string{"crm", "contacts", "create"}},
		{"underscores", "hr_employees_list", []string{"hr", "employees", "list"}},
		{"hyphens", "inventory-stock-level-adjust", []string{"inventory", "stock", "level", "adjust"}},
		{"camelCase", "billingInvoiceMarkPaid", []string{"billing", "invoice", "mark", "paid"}},
		{"PascalCase", "GetUserByID", []string{"get", "user", "by", "id"}},
		{"acronym then word", "HTTPServerStart", []string{"http", "server", "start"}},
		{"word then acronym", "parseJSON", []string{"parse", "json"}},
		{"acronym alone", "APIKey", []string{"api", "key"}},
		{"digits stay with letters", "getV2Users", []string{"get", "v2", "users"}},
		{"digits inside a word", "base64Encode", []string{"base64", "encode"}},
		{"digits after separator", "s3_bucket_2", []string{"s3", "bucket", "2"}},
		{"one-letter prefix", "iCloudSync", []string{"icloud", "sync"}},
		{"mixed separators", "payments.paymentMethod.set-default_v2", []string{"payments", "payment", "method", "set", "default", "v2"}},
		{"separators only", "._-", nil},
		{"empty", "", nil},
		{"unicode letters", "größeÄndern", []string{"größe", "ändern"}},
		{"invalid utf-8 is a separator", "get\xffuser", []string{"get", "user"}},
		{"long runs are cut", strings.Repeat("a", 100), []string{strings.Repeat("a", maxTokenRunes)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := identifierWords(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("identifierWords(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSplitWordsFlags(t *testing.T) {
	var got []word
	splitWords("Create a contact for Jane. Then email INV-42.", func(w word) { got = append(got, w) })
	want := []word{
		{text: "create", upper: true, first: true},
		{text: "a"},
		{text: "contact"},
		{text: "for"},
		{text: "jane", upper: true},
		{text: "then", upper: true, first: true},
		{text: "email"},
		{text: "inv", upper: true},
		{text: "42", digit: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("splitWords flags:\n got %+v\nwant %+v", got, want)
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		// Plurals.
		{"contacts", "contact"},
		{"contact", "contact"},
		{"entries", "entry"},
		{"entry", "entry"},
		{"addresses", "address"},
		{"address", "address"},
		{"batches", "batch"},
		{"boxes", "box"},
		{"status", "status"},
		{"analysis", "analysis"},
		{"ids", "id"},
		{"invoices", "invoic"},
		{"invoice", "invoic"},
		// Verb forms meet their base.
		{"create", "creat"},
		{"created", "creat"},
		{"creating", "creat"},
		{"creates", "creat"},
		{"getting", "get"},
		{"gets", "get"},
		{"planned", "plan"},
		{"billing", "bill"},
		{"added", "add"},
		{"filed", "file"},
		{"file", "file"},
		{"applied", "apply"},
		{"need", "need"},
		{"string", "string"},
		// Derivations.
		{"deployment", "deploy"},
		{"deployments", "deploy"},
		{"payment", "payment"},
		{"creation", "creat"},
		{"deletion", "delet"},
		{"delete", "delet"},
		{"production", "production"},
		{"collection", "collection"},
		{"ownership", "owner"},
		{"memberships", "member"},
		{"availability", "availabl"},
		{"available", "availabl"},
		{"compatibility", "compatibl"},
		{"ship", "ship"},
		{"worship", "worship"},
		// Irregular forms and words with digits.
		{"paid", "pay"},
		{"sent", "send"},
		{"people", "person"},
		{"v2", "v2"},
		{"oauth2", "oauth2"},
		{"größe", "größe"},
	}
	for _, tt := range tests {
		if got := normalize(tt.in); got != tt.want {
			t.Errorf("normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIndexTermsPhrasesAndStopwords(t *testing.T) {
	var got []string
	indexTerms("Please roll back the deployments to the previous version", func(s string) { got = append(got, s) })
	want := []string{"rollback", "roll", "deploy", "previous", "version"}
	if !slices.Equal(got, want) {
		t.Errorf("indexTerms = %q, want %q", got, want)
	}
}

func TestReadSchema(t *testing.T) {
	schema := `{
		"type": "object",
		"description": "Arguments.",
		"properties": {
			"contactId": {"type": "string", "description": "Which contact."},
			"tags": {"type": "array", "items": {"type": "object", "properties": {"label": {"title": "Tag label"}}}},
			"format": {"enum": ["csv", "json", 3]},
			"owner": {"$ref": "#/$defs/person"}
		},
		"$defs": {"person": {"properties": {"email": {"description": "Work email."}}}},
		"anyOf": [{"properties": {"region": {}}}]
	}`
	st := readSchema([]byte(schema))
	wantNames := []string{"contactId", "format", "owner", "tags", "label", "region", "email"}
	if !slices.Equal(st.names, wantNames) {
		t.Errorf("names = %q, want %q", st.names, wantNames)
	}
	wantTexts := []string{"Arguments.", "Which contact.", "csv", "json", "Tag label", "Work email."}
	if !slices.Equal(st.texts, wantTexts) {
		t.Errorf("texts = %q, want %q", st.texts, wantTexts)
	}
	for _, bad := range []string{"", "not json", "[1,2]", `"string"`, `{"properties": []}`} {
		if st := readSchema([]byte(bad)); len(st.names)+len(st.texts) != 0 {
			t.Errorf("readSchema(%q) = %+v, want nothing", bad, st)
		}
	}
}

func TestReadSchemaBounded(t *testing.T) {
	// A schema nested far deeper than maxSchemaDepth is read only to the
	// limit, and never recursed without bound.
	var b strings.Builder
	const depth = 200
	for range depth {
		b.WriteString(`{"properties": {"p": `)
	}
	b.WriteString(`{}`)
	for range depth {
		b.WriteString(`}}`)
	}
	st := readSchema([]byte(b.String()))
	if len(st.names) == 0 || len(st.names) > maxSchemaDepth+1 {
		t.Errorf("read %d nested property names, want 1..%d", len(st.names), maxSchemaDepth+1)
	}
}
