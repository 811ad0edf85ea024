package search

import "strings"

// The lexicon is generic English of business software: function words to
// drop, a few phrasal verbs that mean one thing, irregular forms, and groups
// of words that people use for the same operation or object. It knows
// nothing about any particular catalog; a tool's own words always weigh more
// than a synonym (see params.synonymWeight).

// stopwords carry no intent. Light verbs ("give Jane a raise", "put her on
// the list", "take a snapshot") are among them: their object says what is
// wanted, and as unknown words they would count against the gate. They are dropped from queries and from indexed
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
give gives gave given giving put puts putting take takes took taken taking
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
	// Inflections of the phrasal verbs above.
	"logging in": "login", "signing in": "login", "logs in": "login", "signs in": "login",
	"logging out": "logout", "signing out": "logout", "log off": "logout", "logged off": "logout",
	"signing up": "register", "signs up": "register", "sign up for": "subscribe", "signed up for": "subscribe", "signing up for": "subscribe",
	"sets up": "create", "looked up": "lookup",
	"rolling back": "rollback", "rolls back": "rollback", "rolling out": "deploy", "rolls out": "deploy",
	"kicking off": "start", "called off": "cancel", "calling off": "cancel",
	"turned on": "enable", "turning on": "enable", "switched on": "enable",
	"turned off": "disable", "turning off": "disable", "switched off": "disable",
	"powered on": "start", "power up": "start", "powered up": "start", "start up": "start", "started up": "start",
	"powered off": "stop", "power down": "stop", "powered down": "stop", "shutting down": "stop", "shuts down": "stop",
	"opting out": "unsubscribe", "opting in": "subscribe",
	"sent back": "return", "sending back": "return", "sends back": "return",
	"give back": "return", "gave back": "return", "given back": "return", "brought back": "restore",
	"followed up": "remind", "following up": "remind",
	"got rid of": "delete", "getting rid of": "delete", "cleaned up": "delete", "cleaning up": "delete",
	"handed over": "transfer", "hand off": "transfer", "handed off": "transfer",
	"wrapped up": "close", "wrapping up": "close",
	"backed up": "backup", "backing up": "backup",
	"laying off": "terminate", "lays off": "terminate",
	"wrote off": "void", "written off": "void", "writing off": "void",
	"filled in": "update", "filled out": "update",

	// Phrasal verbs that name one operation.
	"hand in": "submit", "hands in": "submit", "handed in": "submit", "handing in": "submit",
	"turn in": "submit", "turned in": "submit",
	"put on hold": "hold", "putting on hold": "hold", "place on hold": "hold", "placed on hold": "hold", "on hold": "hold",
	"take down": "unpublish", "taking down": "unpublish", "took down": "unpublish", "taken down": "unpublish",
	"spin up": "create", "spinning up": "create", "spun up": "create",
	"spin down": "stop", "spun down": "stop",
	"tear down": "destroy", "tearing down": "destroy", "tore down": "destroy", "torn down": "destroy",
	"carry over": "carryover", "carried over": "carryover", "carry forward": "carryover", "carried forward": "carryover",
	"roll over": "rollover", "rolled over": "rollover",
	"turn down": "reject", "turned down": "reject", "turning down": "reject",
	"power cycle": "restart", "power cycled": "restart",
	"pay out": "payout", "paid out": "payout", "cash out": "payout", "cashed out": "payout",
	"top up": "topup", "topped up": "topup", "topping up": "topup",
	"pick up": "pickup", "picked up": "pickup",
	"set aside": "reserve", "put aside": "reserve",
	"push back": "postpone", "pushed back": "postpone",
	"look at": "view", "looking at": "view", "look over": "review", "go over": "review",
	"sort out": "resolve", "sorted out": "resolve",
	"put together": "create", "draw up": "create", "drew up": "create", "drawn up": "create", "figure out": "find",
	"hook up": "connect", "hooked up": "connect",
	"throw out": "discard", "threw out": "discard", "thrown out": "discard",
	"tick off": "complete", "ticked off": "complete", "check off": "complete", "checked off": "complete",
	"place an order": "order", "placed an order": "order", "place order": "order", "placing an order": "order",

	// Multi-word names of one object. A phrase replaces its words in a
	// query, so its term must be the one word tools use for the object
	// ("load balancer" is a balancer, not something to load).
	"recycle bin": "trash", "recycling bin": "trash", "trash can": "trash",
	"mailing lists": "audience", "distribution lists": "audience", "subscriber list": "audience", "subscriber lists": "audience",
	"out of stock": "stockout", "sold out": "stockout",
	"back order": "backorder", "back ordered": "backorder", "back orders": "backorder",
	"price tag": "price", "price tags": "price",
	"shopping cart": "cart", "shopping bag": "cart", "shopping basket": "cart",
	"wish list": "wishlist", "stock keeping unit": "sku",
	"fulfillment center": "warehouse", "fulfilment centre": "warehouse",
	"distribution center": "warehouse", "distribution centre": "warehouse",
	"best before": "expiry", "free trial": "trial",
	"pay rise": "raise", "pay raise": "raise",
	"sick day": "leave", "sick days": "leave", "out of office": "vacation",
	"past due": "overdue", "general ledger": "ledger",
	"accounts payable": "payable", "accounts receivable": "receivable",
	"do not disturb": "dnd", "single sign on": "sso",
	"multi factor": "mfa", "two step": "mfa", "2 step": "mfa",
	"one time password": "otp", "one time passcode": "otp", "one time code": "otp",
	"load balancer": "balancer", "load balancers": "balancer", "load balancing": "balancer",
	"time zone": "timezone", "time zones": "timezone",
	"zip code": "postcode", "zip codes": "postcode", "postal code": "postcode", "postal codes": "postcode",
	"phone number": "phone", "phone numbers": "phone", "mobile number": "phone", "cell number": "phone",
	"email address": "email", "email addresses": "email",
	"ip address": "ip", "ip addresses": "ip", "domain name": "domain", "domain names": "domain",
	"help desk": "helpdesk", "service desk": "helpdesk",
	"customer service": "support", "customer support": "support",
	"post mortem": "postmortem",

	// Filler: an empty term drops the words. "a lot of invoices" is not an
	// inventory lot, and "give me" or "make sure" ask for nothing to be
	// given or made.
	"a lot of": "", "give me": "", "tell me": "", "let me know": "", "go ahead and": "", "make sure": "",
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
	"forgot": "forget", "forgotten": "forget", "undid": "undo", "undone": "undo",
	"redid": "redo", "redone": "redo", "resent": "resend", "reran": "rerun",
	"withdrew": "withdraw", "withdrawn": "withdraw", "withheld": "withhold",
	"overwrote": "overwrite", "overwritten": "overwrite", "rewrote": "rewrite", "rewritten": "rewrite",
	"overpaid": "overpay", "underpaid": "underpay", "prepaid": "prepay", "repaid": "repay",
	"chose": "choose", "drew": "draw", "drawn": "draw", "grew": "grow", "grown": "grow",
	"sought": "seek", "caught": "catch", "taught": "teach", "spoke": "speak", "spoken": "speak",
	"heard": "hear", "spun": "spin", "tore": "tear", "torn": "tear", "threw": "throw", "thrown": "throw",
	"shrank": "shrink", "shrunk": "shrink", "lent": "lend", "learnt": "learn", "flew": "fly", "flown": "fly",
	"proven": "prove", "rose": "rise", "risen": "rise",
	// British doubled l, which the stemmer keeps ("billing" is not "bil").
	"travelled": "travel", "travelling": "travel", "totalled": "total", "totalling": "total",
	"modelled": "model", "modelling": "model", "dialled": "dial", "dialling": "dial",
	"controlled": "control", "controlling": "control",
	"analyses": "analysis", "matrices": "matrix", "criteria": "criterion",
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
	// Operations, continued.
	"kick evict expel remove",
	"ban block",
	"unban unblock",
	"attach mount",
	"detach unmount dismount",
	"disconnect unlink",
	"purge flush clear",
	"invalidate purge",
	"wipe erase",
	"discard scrap",
	"cancel discontinue",
	"fork clone",
	"exchange swap",
	"schedule arrange",
	"reschedule postpone defer",
	"hold pause",
	"retry rerun",
	"revise amend",
	"unpublish unlist delist",
	"carryover rollover",
	"watch follow",
	"watcher follower",
	"unmute unsilence unsnooze",
	"dnd mute snooze",
	"provision create",
	"decommission deprovision retire",
	"teardown destroy",
	"resize scale",
	"sync synchronize synchronise",
	"raise increase",
	"reinstate reactivate",
	"rescind revoke",
	"rsvp respond",
	"announce broadcast",
	"buy purchase",
	"ship dispatch",
	"fulfill fulfil",
	"fulfill ship",
	"restock replenish resupply",
	"reserve allocate",
	"calc calculate",
	"sum total",
	"average avg",
	"percentage percent pct",
	// Derivations, continued.
	"cancel cancellation",
	"invite invitation",
	"verify verification",
	"confirm confirmation",
	"reserve reservation",
	"submit submission",
	"resign resignation",
	"convert conversion",
	"propose proposal",
	"withdraw withdrawal",
	"recur recurrence repeat",
	"install installation",
	"inspect inspection",
	"connect connection",
	"redeem redemption",
	"deduct deduction",
	"transcribe transcription transcript",
	"suspend suspension",
	"exempt exemption",
	"dispose disposal",
	"deny denial",
	"retain retention",
	"promote promotion",
	"demote demotion",
	"attend attendance",
	"absent absence",
	"pay payment",
	"ship shipment",
	"move movement",
	"sell sale",
	"fail failure",
	"refer referral",
	"remind reminder",
	"assign assignee",
	"approve approver",
	"review reviewer",
	"subscribe subscriber",
	"authorize authorise authorization authorisation",
	"auth authentication authorization",
	// British and American spellings.
	"catalog catalogue",
	"license licence",
	"organise organize",
	"prioritise prioritize",
	"customise customize",
	"categorise categorize",
	"finalise finalize",
	"optimise optimize",
	"utilise utilize",
	"utilisation utilization",
	"anonymise anonymize",
	"personalise personalize",
	"analyse analyze analysis",
	"favourite favorite bookmark",
	"colour color",
	"centre center",
	"enquiry inquiry",
	"labour labor",
	"behaviour behavior",
	"programme program",
	"artifact artefact",
	// People and organisation (HR).
	"raise salary",
	"contractor freelancer",
	"manager supervisor boss mgr",
	"teammate colleague coworker",
	"team squad",
	"payslip paystub",
	"timesheet timecard",
	"resign quit",
	"resign terminate",
	"cv resume",
	"goal objective okr",
	"benefit perk",
	"department division",
	"rota roster",
	"contract agreement",
	// Sales and CRM.
	"proposal quote",
	"rep representative salesperson",
	"note memo",
	"churn attrition",
	"sign signature esign esignature",
	"merchant seller",
	// Billing, payments and accounting.
	"charge bill",
	"plan tier",
	"plan subscription",
	"fee charge surcharge",
	"overdue unpaid outstanding delinquent",
	"seat license",
	"usage consumption",
	"chargeback dispute",
	"payout disbursement",
	"transaction txn",
	"reverse reversal",
	"topup recharge refill",
	"topup top",
	"ledger gl",
	"revenue income earnings",
	"forecast projection",
	"annual yearly",
	"po purchase",
	// Shop, inventory and shipping.
	"return rma",
	"product merchandise merch",
	"variant variation",
	"barcode upc ean gtin",
	"bundle kit",
	"cart trolley",
	"stockout stock",
	"batch lot",
	"stocktake count",
	"damaged defective faulty broken",
	"freight cargo",
	"truck lorry",
	"postcode zipcode postal zip",
	// Software delivery and infrastructure.
	"build compile",
	"runner agent executor",
	"dev development",
	"variable var",
	"pr pull",
	"cron schedule",
	"webhook hook callback",
	"error exception",
	"bug defect",
	"balancer lb",
	"k8s kubernetes",
	"uri url",
	"db database",
	"cfg config configuration",
	// Monitoring and incidents.
	"downtime outage",
	"stat statistic",
	"severity sev",
	"priority urgency",
	"postmortem rca",
	"retrospective retro",
	// Identity and access.
	"admin administrator superuser",
	"login signin logon",
	"logout signout logoff",
	"allowlist whitelist safelist",
	"blocklist blacklist denylist",
	"cert certificate",
	"ssl tls",
	"sso saml",
	"scope permission",
	"permission perm",
	"password pwd",
	// Files, mail, chat, support and calendars.
	"spreadsheet sheet workbook",
	"presentation slideshow deck",
	"photo picture pic",
	"image picture",
	"inbox mailbox",
	"spam junk",
	"forward fwd",
	"autoresponder autoreply",
	"dm message",
	"react reaction emoji",
	"helpdesk servicedesk",
	"helpdesk support",
	"macro canned",
	"requester submitter reporter",
	"attendee participant invitee",
	"timezone tz",
	"deadline due",
	"blocker impediment",
	// Marketing and analytics.
	"campaign broadcast blast",
	"newsletter campaign",
	"segment cohort",
	"promotion promo",
	"viz visualization visualisation visualize visualise",
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
		addSynonymGroup(synonyms, terms)
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

// addSynonymGroup links every term of a group to every other one.
func addSynonymGroup(m map[string][]string, terms []string) {
	for _, t := range terms {
		for _, u := range terms {
			if u != t && !contains(m[t], u) {
				m[t] = append(m[t], u)
			}
		}
	}
}
