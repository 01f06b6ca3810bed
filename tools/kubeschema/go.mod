module github.com/toolwire/toolwire/tools/kubeschema

go 1.26
