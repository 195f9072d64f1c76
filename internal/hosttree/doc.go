// Package hosttree names the host's system trees: the directories a
// cleanroom output or bind must never be (/, /etc, /proc, /usr, …), so
// that every command that writes where an operator points it refuses them
// by one rule.
package hosttree
