// Command vulncheck calls Parse of github.com/golang-jwt/jwt/v4 v4.5.0,
// which is GO-2024-3250: govulncheck must report it.
package main

import (
	"fmt"
	"os"

	"github.com/golang-jwt/jwt/v4"
)

func main() {
	_, err := jwt.Parse(os.Getenv("TOKEN"), func(*jwt.Token) (any, error) { return []byte("key"), nil })
	fmt.Println(err)
}
