module github.com/a2astore/a2astore

go 1.26.8

require (
	github.com/a2aproject/a2a-go/v2 v2.3.1
	github.com/jackc/pgx/v5 v5.12.0
	github.com/tidwall/btree v1.8.2
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
