package pgstore

import "github.com/a2astore/a2astore/engine"

// RetainSQL is the examining query of RemoveExpired for req, for plan
// tests.
func (s *Store) RetainSQL(req *engine.RetainRequest) (string, []any) { return s.retainQuery(req) }
