package dashboards_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/a2astore/a2astore/dashboards"
)

// The dashboard is built from the panel table (dashboards.Rows); `go run
// ./dashboards/gen` writes it to dashboards/a2astore.json for Grafana.
func ExampleBuild() {
	b, err := dashboards.Build()
	if err != nil {
		log.Fatal(err)
	}
	var d struct {
		Title string `json:"title"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Title, len(dashboards.Rows) > 0)
	// Output:
	// a2astore true
}
