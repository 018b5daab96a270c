package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// helper is the test binary acting as a target program.
func helper(mode string, args []string) int {
	switch mode {
	case "get":
		// A Go client: net/http reads HTTP_PROXY and HTTPS_PROXY.
		c := &http.Client{Timeout: 20 * time.Second}
		code := 0
		for _, u := range args {
			resp, err := c.Get(u)
			if err != nil {
				fmt.Printf("%s error %v\n", u, err)
				code = 3
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Printf("%s %d %s\n", u, resp.StatusCode, strings.TrimSpace(string(body)))
			if resp.StatusCode != 200 {
				code = 3
			}
		}
		return code
	case "signal":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		fmt.Println("ready")
		select {
		case s := <-ch:
			fmt.Println("got", s)
			return 40 + int(s.(syscall.Signal))
		case <-time.After(30 * time.Second):
			return 99
		}
	case "sleep":
		fmt.Println(os.Getpid())
		time.Sleep(30 * time.Second)
		return 0
	case "kill-parent":
		// A target that kills hermetic, to get out from under it.
		fmt.Println(os.Getpid())
		syscall.Kill(os.Getppid(), syscall.SIGKILL)
		time.Sleep(30 * time.Second)
		return 0
	}
	return 97
}
