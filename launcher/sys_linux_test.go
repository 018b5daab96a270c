package launcher

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hermetic-dev/hermetic/policy"
)

func fcntlClearCloexec(fd uintptr) (int, error) {
	return unix.FcntlInt(fd, unix.F_SETFD, 0)
}

func TestRunOnlyStandardDescriptors(t *testing.T) {
	// A descriptor hermetic inherited without close-on-exec must not reach
	// the target.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := fcntlClearCloexec(w.Fd()); err != nil {
		t.Fatal(err)
	}
	leak, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", w.Fd()))
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	res, out, _, err := runHelper(t, Settings{Net: policy.Config{NoNetwork: true}}, RunOptions{}, "fds")
	if err != nil || res.ExitCode != 0 {
		t.Fatal(res, err)
	}
	if strings.Contains(out, leak) {
		t.Errorf("the target inherited %s:\n%s", leak, out)
	}
}
