// Package textsafe shows untrusted text to a person without letting it
// act on the display: [Visible] spells out the characters that control a
// terminal or reorder, hide or break the text around them.
package textsafe
