// Command gen writes dashboards/a2astore.json from the panel table in
// package dashboards: go run ./dashboards/gen
package main

import (
	"fmt"
	"os"

	"github.com/a2astore/a2astore/dashboards"
)

func main() {
	b, err := dashboards.Build()
	if err == nil {
		err = os.WriteFile("dashboards/a2astore.json", b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
