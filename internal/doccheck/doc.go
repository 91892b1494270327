// Package doccheck keeps the manual true: the tests of this package fail
// when a relative link or #anchor in README.md, CONTRIBUTING.md or docs/
// does not resolve (anchors as GitHub renders headings), when a Go snippet
// in them is not an excerpt of a compiled function of the repository (each
// ```go block names its source in a `<!-- snippet: DIR FUNC -->` comment
// just above it: runnable Example functions, mostly), and when the import
// rules CONTRIBUTING.md states are broken.
//
// The flag reference, docs/flags.md, has its own generator and check
// (cmd/flagref).
package doccheck
