package search

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// queryTerms returns the terms parse would look up for q: phrases joined,
// stopwords and one-letter words dropped, the rest normalised.
func queryTerms(q string) []string {
	var out []string
	analyze(q, false, func(t token) {
		if !t.phrase && stopwords[t.text] {
			return
		}
		if utf8.RuneCountInString(t.text) < 2 && !t.digit {
			return
		}
		out = append(out, normalize(t.text))
	})
	return out
}

// TestPhrasesWellFormed checks that every phrase can match: its key is the
// lowercase words the tokenizer produces, no longer than maxPhraseWords,
// and its term is one word that survives (or empty, for filler).
func TestPhrasesWellFormed(t *testing.T) {
	for key, term := range phrases {
		words := identifierWords(key)
		if strings.Join(words, " ") != key || len(words) < 2 || len(words) > maxPhraseWords {
			t.Errorf("phrase %q cannot match: the tokenizer makes %q of it", key, words)
		}
		if term == "" {
			continue
		}
		if len(identifierWords(term)) != 1 || identifierWords(term)[0] != term || stopwords[term] {
			t.Errorf("phrase %q has term %q, want one lowercase word that is not a stopword", key, term)
		}
	}
}

func TestPhrasesInQueries(t *testing.T) {
	tests := []struct {
		query string
		want  []string
	}{
		{"let a shopper send back shoes", []string{"shopper", "return", "shoe"}},
		{"put on hold order 42", []string{"hold", "order", "42"}},
		{"which orders are on hold", []string{"order", "hold"}},
		{"spin up a new server", []string{"creat", "new", "server"}},
		{"tear down the test environment", []string{"destroy", "test", "environ"}},
		{"carry over unused leave", []string{"carryover", "unus", "leav"}},
		{"which products are out of stock", []string{"product", "stockout"}},
		{"empty the recycle bin", []string{"empty", "trash"}},
		{"add her to the mailing lists", []string{"add", "audienc"}},
		{"change the price tag", []string{"chang", "pric"}},
		{"hand in my timesheet", []string{"submit", "timesheet"}},
		{"sign up for the pro plan", []string{"subscrib", "pro", "plan"}},
		{"sign up a new user", []string{"register", "new", "user"}},
		{"list load balancers", []string{"list", "balancer"}},
		{"update the customer's email address", []string{"updat", "customer", "email"}},
		{"set the time zone", []string{"set", "timezon"}},
		{"turn on single sign-on", []string{"enabl", "sso"}},
		{"turn down the request", []string{"reject", "request"}},
		// Filler is dropped: a lot is not an inventory lot.
		{"we have a lot of overdue invoices", []string{"overdu", "invoic"}},
		{"recall lot 4411", []string{"recall", "lot", "4411"}},
		{"give me the open tickets", []string{"open", "ticket"}},
	}
	for _, tt := range tests {
		if got := queryTerms(tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("queryTerms(%q) = %q, want %q", tt.query, got, tt.want)
		}
	}
}

func TestIrregularForms(t *testing.T) {
	for in, want := range map[string]string{
		"forgotten": "forget", "withdrawn": "withdraw", "reran": "rerun", "undone": "undo",
		"travelled": "travel", "overpaid": "overpay",
	} {
		if got := normalize(in); got != stem(want) {
			t.Errorf("normalize(%q) = %q, want %q", in, got, stem(want))
		}
	}
}

func TestSynonymLinks(t *testing.T) {
	linked := func(a, b string) bool { return slices.Contains(synonyms[normalize(a)], normalize(b)) }
	for _, p := range [][2]string{
		{"raise", "salary"}, {"shopper", "customer"}, {"buyer", "customer"},
		{"lot", "batch"}, {"charge", "bill"}, {"plan", "subscription"}, {"plan", "tier"},
		{"snooze", "mute"}, {"silence", "mute"}, {"kick", "remove"}, {"evict", "remove"},
		{"trash", "bin"}, {"rma", "return"}, {"payslip", "paystub"}, {"runner", "agent"},
		{"artefact", "artifact"}, {"catalogue", "catalog"}, {"reminder", "remind"},
		{"shipment", "ship"}, {"cancellation", "cancel"}, {"unpaid", "overdue"},
		{"chargeback", "dispute"}, {"lb", "balancer"}, {"signin", "login"},
	} {
		if !linked(p[0], p[1]) || !linked(p[1], p[0]) {
			t.Errorf("%s and %s are not synonyms both ways", p[0], p[1])
		}
	}
	// Loose links would let unrelated requests match tools.
	for _, p := range [][2]string{
		{"table", "book"}, {"book", "table"}, {"lot", "many"}, {"plan", "create"},
		{"charge", "customer"}, {"seat", "table"}, {"rating", "review"}, {"direct", "message"},
	} {
		if linked(p[0], p[1]) {
			t.Errorf("%s should not expand to %s", p[0], p[1])
		}
	}
	// Words of other walks of life, and words too generic to mean one
	// thing, have no synonyms.
	for _, w := range []string{"table", "restaurant", "pizza", "weather", "data", "thing", "do", "set"} {
		if s := synonyms[normalize(w)]; len(s) != 0 {
			t.Errorf("%s expands to %q", w, s)
		}
	}
}

// TestEverydayRequests runs everyday wording against a small catalog of API
// tools: the lexicon bridges the words, and requests outside business
// software still find nothing.
func TestEverydayRequests(t *testing.T) {
	tool := func(name, desc string) Doc { return Doc{Name: name, Description: desc} }
	docs := []Doc{
		tool("shop_returns_create", "Open a return for a customer's items from an order."),
		tool("shop_orders_hold", "Stop an order from being fulfilled."),
		tool("shop_orders_list", "List orders."),
		tool("shop_customers_get", "Get a customer."),
		tool("billing_subscriptions_cancel", "Cancel a subscription at period end."),
		tool("billing_invoices_list", "List invoices by status."),
		tool("hr_salary_update", "Change an employee's salary."),
		tool("hr_timesheets_submit", "Submit a timesheet for approval."),
		tool("hr_leave_carryover_set", "Move unused leave into the next year."),
		tool("inventory_batches_recall", "Recall a batch."),
		tool("inventory_stock_list", "Stock on hand per SKU."),
		tool("cloud_instances_create", "Launch a virtual machine."),
		tool("cloud_instances_reboot", "Reboot an instance."),
		tool("cloud_environments_destroy", "Destroy an environment."),
		tool("monitoring_alerts_mute", "Mute an alert rule."),
		tool("chat_channel_members_remove", "Remove a member from a channel."),
		tool("drive_trash_empty", "Delete everything in the trash."),
		tool("wallet_topup", "Add funds to a wallet."),
		tool("payments_payouts_create", "Send money to a connected account."),
		tool("ci_builds_retry", "Run a failed build again."),
		tool("ci_runners_list", "List runners."),
	}
	ix := New(docs, Options{})
	tests := []struct{ query, top string }{
		{"let a shopper send back shoes", "shop_returns_create"},
		{"put order 1001 on hold", "shop_orders_hold"},
		{"spin up a new server", "cloud_instances_create"},
		{"power cycle the vm", "cloud_instances_reboot"},
		{"tear down the staging environment", "cloud_environments_destroy"},
		{"carry over unused vacation days", "hr_leave_carryover_set"},
		{"we have a lot of overdue invoices", "billing_invoices_list"},
		{"kick Bob out of the channel", "chat_channel_members_remove"},
		{"which products are out of stock", "inventory_stock_list"},
		{"pay rise for Jane", "hr_salary_update"},
		{"snooze the alert", "monitoring_alerts_mute"},
		{"hand in my timesheet", "hr_timesheets_submit"},
		{"recall lot 4411", "inventory_batches_recall"},
		{"empty the recycle bin", "drive_trash_empty"},
		{"top up the wallet", "wallet_topup"},
		{"pay out the seller", "payments_payouts_create"},
		{"retry the failed build", "ci_builds_retry"},
		{"which agents are online", "ci_runners_list"},
	}
	for _, tt := range tests {
		hits := ix.Search(tt.query, 0)
		if len(hits) == 0 || hits[0].Name != tt.top {
			t.Errorf("Search(%q) = %v, want %s first", tt.query, hitNames(hits), tt.top)
		}
	}
	for _, q := range []string{"book a table at a restaurant", "order a pizza", "play some jazz", "what's the weather tomorrow"} {
		if hits := ix.Search(q, 0); len(hits) != 0 {
			t.Errorf("Search(%q) = %v, want no hits", q, hitNames(hits))
		}
	}
}
