// The canary of `make vulncheck` (scripts/vulncheck.sh): a module that
// calls a known-vulnerable function, so a working check must report it.
// golang.org/x/text v0.3.7's language.ParseAcceptLanguage is GO-2022-1059
// (CVE-2022-32149, fixed in v0.3.8). Never update it.
module example.com/vulncheck

go 1.26

require golang.org/x/text v0.3.7

