// The filter of `make vulncheck` (scripts/vulncheck.sh): its own module, so
// it is run with `go run` and adds nothing to the main module.
module github.com/toolmesh/toolmesh/scripts/vulnexcept

go 1.26
