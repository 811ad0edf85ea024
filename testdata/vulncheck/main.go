// Command vulncheck calls language.ParseAcceptLanguage of golang.org/x/text
// v0.3.7, which is GO-2022-1059: govulncheck must report it.
package main

import (
	"fmt"
	"os"

	"golang.org/x/text/language"
)

func main() {
	tags, _, err := language.ParseAcceptLanguage(os.Getenv("ACCEPT_LANGUAGE"))
	fmt.Println(tags, err)
}
