// Package capbuf is cleanroom's one bounded output buffer: what a child
// process (git, an evaluator, an agent's --version) writes is kept up to a
// cap and the rest counted as lost, without ever failing the write (a
// child told EPIPE or blocked on a full pipe would change what it does).
package capbuf
