package launcher

import (
	"errors"
	"strings"
)

// SplitWords splits s into words the way a POSIX shell splits a simple
// command line, without any evaluation: whitespace separates words, single
// quotes keep everything literally, double quotes keep everything but
// backslash-escaped `"` and `\`, and a backslash outside quotes escapes the
// next character. `$`, backquotes, globs and the like are ordinary
// characters. It is used for HERMETIC_FLAGS, which must never run anything.
func SplitWords(s string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quote   byte // 0, '\'' or '"'
		escaped bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
			if quote == '"' && c != '"' && c != '\\' {
				// Inside double quotes a backslash escapes only `"` and `\`.
				cur.WriteByte('\\')
			}
			cur.WriteByte(c)
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote = c
			inWord = true
		case c == '\\':
			escaped = true
			inWord = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	switch {
	case escaped && quote == 0:
		return nil, errors.New("trailing backslash")
	case quote == '\'':
		return nil, errors.New("unterminated single quote")
	case quote == '"':
		return nil, errors.New("unterminated double quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// ShellQuote quotes s for a POSIX shell so that it is one literal word.
func ShellQuote(s string) string { return shellQuote(s) }

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
