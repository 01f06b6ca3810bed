// Command custom-worker is a toolwire worker of your own: one typed Go
// function, registered as the tool word_count and served on the worker
// pool of native tools. See README.md in this directory.
package main
