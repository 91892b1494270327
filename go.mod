module github.com/a2astore/a2astore

go 1.26.8

require (
	github.com/a2aproject/a2a-go/v2 v2.3.1
	github.com/tidwall/btree v1.8.2
)

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/sync v0.19.0 // indirect
)
