// go-mysql (github.com/go-mysql-org/go-mysql) decoding binlog files with ParseFile:
// every event is parsed, rows events with their values. Prints "events rows errors".
package main

import (
	"fmt"
	"os"

	"github.com/go-mysql-org/go-mysql/replication"
)

func main() {
	events, rows, errors := 0, 0, 0
	for _, name := range os.Args[1:] {
		p := replication.NewBinlogParser()
		p.SetVerifyChecksum(true)
		err := p.ParseFile(name, 4, func(e *replication.BinlogEvent) error {
			events++
			if r, ok := e.Event.(*replication.RowsEvent); ok {
				rows += len(r.Rows)
			}
			return nil
		})
		if err != nil {
			errors++
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		}
	}
	fmt.Printf("%d %d %d\n", events, rows, errors)
}
