module github.com/hermetic-dev/hermetic

go 1.26.0

require (
	github.com/spf13/pflag v1.1.0
	golang.org/x/net v0.62.0
)

require golang.org/x/text v0.43.0 // indirect
