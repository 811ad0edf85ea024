// The canary of `make vulncheck` (scripts/vulncheck.sh): a module that
// calls a known-vulnerable function, so a working check must report it.
// github.com/golang-jwt/jwt/v4 v4.5.0's Parse is GO-2024-3250
// (CVE-2024-51744, fixed in v4.5.1). Never update it.
module example.com/vulncheck

go 1.26

require github.com/golang-jwt/jwt/v4 v4.5.0
