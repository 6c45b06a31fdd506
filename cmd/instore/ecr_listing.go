package main

import (
	"time"

	"github.com/spf13/pflag"
)

// paging are a listing's paging flags: --limit, --cursor and --all.
type paging struct {
	cursor string
	limit  int
	all    bool
}

// add defines the flags on fs; size says the page sizes the API takes.
func (p *paging) add(fs *pflag.FlagSet, size string) {
	fs.IntVar(&p.limit, "limit", 0, "page size, "+size)
	fs.StringVar(&p.cursor, "cursor", "", "continue a listing from its nextCursor")
	fs.BoolVar(&p.all, "all", false, "fetch every page")
}

// listing are the flags of a listing by time (--from, --to), of one
// terminal (--terminal), with paging of 1 to 1000 a page.
type listing struct {
	from, to, terminal string
	paging
}

// add defines the flags on fs; field names the time the listing is by
// (createdAt, closedAt) and ago an example of a --from duration.
func (l *listing) add(fs *pflag.FlagSet, field, ago string) {
	fs.StringVar(&l.from, "from", "", "oldest "+field+": RFC 3339 time or a duration ago such as "+ago)
	fs.StringVar(&l.to, "to", "", field+" before: RFC 3339 time or a duration ago")
	fs.StringVar(&l.terminal, "terminal", "", "only this terminal ID")
	l.paging.add(fs, "1-1000 (default 100)")
}

// window reads --from and --to (whenFlag).
func (l *listing) window() (from, to time.Time, err error) {
	now := time.Now()
	if from, err = whenFlag("--from", l.from, now); err != nil {
		return from, to, err
	}
	to, err = whenFlag("--to", l.to, now)
	return from, to, err
}
