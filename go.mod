module github.com/hermetic-dev/hermetic

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/elazarl/goproxy v1.9.2
	github.com/miekg/dns v1.1.73
	github.com/rogpeppe/go-internal v1.16.0
	github.com/spf13/pflag v1.1.0
	github.com/things-go/go-socks5 v0.1.1
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0
)

require (
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
)
