package search

import "strings"

// The lexicon is generic English of business software: function words to
// drop, a few phrasal verbs that mean one thing, irregular forms, and groups
// of words that people use for the same operation or object. It knows
// nothing about any particular catalog; a tool's own words always weigh more
// than a synonym (see params.synonymWeight).

// stopwords carry no intent. They are dropped from queries and from indexed
// text after phrases have been joined, so "look up" and "sign in" survive.
var stopwords = setOf(`
a an the and or nor but if then else than so such too very really just also
of to in on at by for with from into onto about as via per out off up down over back
is are was were be been being am do does did doing done have has had having
i me my mine myself we us our ours you your yours he him his she her hers it its
they them their theirs this that these those there here
what which who whom whose when where why how whether
can could would should will shall may might must
please pls kindly want wants wanted need needs needed like let lets
some any each every either neither both other another same own
not no yes don doesn didn isn aren wasn t s d ll m re ve
thing things something anything stuff someone somebody anyone anybody everything
help tool tools way able going gonna wanna try trying
hey hi hello thanks thank ok okay sure now currently right quickly again
one ones all etc eg ie
two three four five six seven eight nine ten twenty hundred thousand
after before during within without across between through while since until
`)

// phrases join multi-word expressions into one term before stopwords go.
var phrases = map[string]string{
	"look up": "lookup", "looking up": "lookup", "look for": "find", "looking for": "find",
	"sign in": "login", "log in": "login", "logged in": "login", "signed in": "login",
	"sign out": "logout", "log out": "logout", "logged out": "logout",
	"sign up": "register", "signed up": "register",
	"set up": "create", "setting up": "create",
	"how many": "count", "number of": "count",
	"time off": "leave", "day off": "leave", "days off": "leave",
	"roll back": "rollback", "rolled back": "rollback",
	"roll out": "deploy", "rolled out": "deploy",
	"kick off": "start", "kicked off": "start",
	"call off": "cancel",
	"turn on":  "enable", "switch on": "enable",
	"turn off": "disable", "switch off": "disable",
	"power on": "start", "boot up": "start",
	"power off": "stop", "shut down": "stop",
	"opt out": "unsubscribe", "opted out": "unsubscribe",
	"opt in": "subscribe", "opted in": "subscribe",
	"e mail":          "email",
	"to do":           "todo",
	"on call":         "oncall",
	"money back":      "refund",
	"send back":       "return",
	"virtual machine": "vm", "virtual machines": "vm",
	"credit card": "card", "debit card": "card",
	"follow up":  "remind",
	"get rid of": "delete", "clean up": "delete",
	"hand over":   "transfer",
	"check out":   "checkout",
	"wrap up":     "close",
	"make public": "publish", "go live": "publish",
	"mark as done": "complete", "mark done": "complete",
	"fill in": "update", "fill out": "update",
	"back up": "backup",
	"pull up": "get", "bring up": "get",
	"bring back": "restore",
	"let go":     "terminate", "lay off": "terminate", "laid off": "terminate",
	"sign off": "approve", "signed off": "approve",
	"mailing list": "audience", "distribution list": "audience",
	"write off": "void",
	"pay back":  "repay", "paid back": "repay",
	"note down": "record", "write down": "record", "jot down": "record",
	"sales tax":  "tax",
	"two factor": "mfa", "2 factor": "mfa", "second factor": "mfa",
}

// maxPhraseWords is the longest key of phrases.
const maxPhraseWords = 3

// irregularForms maps irregular inflections (and a few compounds) to their
// base form.
var irregularForms = map[string]string{
	"paid": "pay", "sent": "send", "sold": "sell", "bought": "buy", "made": "make",
	"ran": "run", "wrote": "write", "written": "write", "gave": "give", "given": "give",
	"took": "take", "taken": "take", "found": "find", "kept": "keep", "chosen": "choose",
	"spent": "spend", "began": "begin", "begun": "begin", "hidden": "hide", "hid": "hide",
	"froze": "freeze", "frozen": "freeze", "people": "person", "children": "child",
	"indices": "index", "cancelled": "cancel", "cancelling": "cancel", "canceled": "cancel",
	"canceling": "cancel", "labelled": "label", "labelling": "label", "built": "build",
	"rebuilt": "rebuild", "got": "get", "gotten": "get", "told": "tell", "met": "meet",
	"held": "hold", "brought": "bring", "saw": "see", "seen": "see", "shown": "show",
	"known": "know", "went": "go", "gone": "go", "shutdown": "stop",
	"e-mail": "email", "emails": "email", "emailed": "email", "emailing": "email",
}

// synonymGroups are sets of words used for the same operation or object.
// A query word expands to the other members of its groups.
var synonymGroups = []string{
	// Operations.
	"create add new make insert register open generate",
	"get fetch retrieve read show view display lookup see detail info information",
	"list show browse enumerate",
	"update edit modify change alter amend patch",
	"delete remove erase destroy drop discard purge",
	"search find lookup locate query",
	"send deliver dispatch transmit",
	"cancel abort void revoke",
	"start begin launch",
	"run trigger execute rerun",
	"stop halt kill",
	"restart reboot bounce",
	"assign allocate delegate reassign",
	"approve accept authorize authorise confirm",
	"reject decline deny refuse",
	"archive hide shelve",
	"restore recover undelete unarchive",
	"rollback revert undo",
	"export download dump extract",
	"import upload ingest load",
	"count tally total",
	"merge combine dedupe deduplicate consolidate",
	"copy duplicate clone",
	"move relocate transfer",
	"reserve book",
	"pay settle remit",
	"refund reimburse repay",
	"remind nudge chase",
	"publish release",
	"pause suspend freeze",
	"resume unpause continue reactivate",
	"enable activate",
	"disable deactivate",
	"lock block freeze",
	"unlock unblock",
	"close shut",
	"complete finish",
	"resolve solve fix",
	"rotate renew regenerate",
	"log record",
	"request ask",
	"compare diff difference",
	"calculate compute estimate",
	"validate verify check",
	"summarize summarise summary overview",
	"reply respond answer",
	"mute silence snooze",
	"acknowledge ack",
	"escalate bump",
	"register signup enroll enrol",
	"share grant",
	"track trace",
	"terminate fire dismiss offboard",
	"promote elevate advance",
	"hire recruit onboard employ",
	"notify inform",
	"deploy rollout",
	// Derivations the light stemmer does not fold.
	"subscribe subscription",
	"register registration",
	"configure configuration",
	"approve approval",
	"renew renewal",
	"remove removal",
	"available availability",
	"owner ownership own",
	"reconcile reconciliation",
	"assign assignment",
	"notify notification",
	"deliver delivery deliverable",
	"expire expiry expiration",
	"expense expenditure spending",
	"refund refundable",
	"archive archival",
	"schedule scheduler",
	// Objects.
	"customer client buyer shopper purchaser",
	"employee staff worker personnel colleague coworker hire",
	"company organisation organization org business firm",
	"invoice bill",
	"ticket issue case",
	"email mail",
	"message msg",
	"meeting event appointment conference",
	"file document doc",
	"folder directory dir",
	"trash bin recycle",
	"payment charge",
	"product item sku",
	"order purchase",
	"shipment package parcel delivery consignment",
	"discount coupon promo voucher",
	"price cost",
	"salary wage compensation pay",
	"leave vacation pto absence holiday",
	"job position opening vacancy",
	"candidate applicant",
	"review evaluation appraisal",
	"instance vm server machine host",
	"volume disk",
	"snapshot backup",
	"network vpc",
	"alert alarm",
	"incident outage",
	"chart graph plot",
	"secret credential token",
	"password passcode passphrase",
	"permission privilege access",
	"task todo chore",
	"comment remark",
	"label tag",
	"sms text",
	"phone mobile cell telephone",
	"newsletter bulletin mailing",
	"ad advert advertisement",
	"tax vat gst",
	"vendor supplier",
	"stock inventory",
	"warehouse depot storehouse",
	"opportunity deal",
	"lead prospect",
	"metric measurement kpi",
	"oncall pager",
	"pipeline workflow",
	"environment env",
	"repository repo",
	"mfa 2fa otp authenticator",
	"session login",
	"revision version history",
	"sprint iteration",
	"board kanban",
	"subscription membership",
	"cart basket",
	"shop store storefront",
	"quote estimate quotation",
	"carrier courier",
	"survey questionnaire poll csat",
	"thread conversation",
	"template boilerplate preset",
	"link url",
	"calendar cal",
	"marketing mktg",
	"account acct",
	"monitoring mon monitor",
	"management mgmt",
	"department dept",
	"quantity qty",
	"amount amt",
	"configuration config",
	"production prod",
}

var (
	// irregular maps a lowercase word to its index term.
	irregular = map[string]string{}
	// synonyms maps an index term to the other terms of its groups.
	synonyms = map[string][]string{}
	// phraseStarts holds the first word of every phrase.
	phraseStarts = map[string]bool{}
)

func init() {
	for p := range phrases {
		phraseStarts[strings.Fields(p)[0]] = true
	}
	for w, base := range irregularForms {
		irregular[w] = stem(base)
	}
	for _, g := range synonymGroups {
		var terms []string
		for _, w := range strings.Fields(g) {
			terms = append(terms, normalize(w))
		}
		for _, t := range terms {
			for _, u := range terms {
				if u != t && !contains(synonyms[t], u) {
					synonyms[t] = append(synonyms[t], u)
				}
			}
		}
	}
}

func setOf(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
