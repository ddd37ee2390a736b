// Package houserules holds, in its tests, the rules of the repository's layout: no Go file
// over 600 lines, labeldistill's own package at most 2,500 lines, imports pointing down the
// packages' layers only, and no environment read by the library at import.
package houserules
