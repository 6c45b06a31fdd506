package sqlstore

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStatements bounds a statement cache. The store's statements are
// a fixed set (the listing's filters make 16 shapes); past the bound a
// query simply runs unprepared.
const maxCachedStatements = 256

// stmtCache keeps one prepared *sql.Stmt per query text of a pool, so that
// the hot statements are parsed once per connection instead of at every
// call. database/sql prepares a cached statement lazily on each connection
// that runs it and reuses that inside transactions (Tx.StmtContext).
//
// SQLite only: with the modernc driver every unprepared query is parsed
// again (a quarter of the server's CPU in the purchase load test), while
// pgx keeps its own per-connection statement cache.
type stmtCache struct {
	db *sql.DB
	mu sync.RWMutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache { return &stmtCache{db: db, m: map[string]*sql.Stmt{}} }

// cached returns the prepared statement of query, or nil if it was not
// prepared yet.
func (sc *stmtCache) cached(query string) *sql.Stmt {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	return sc.m[query]
}

// prepare returns the prepared statement of query, preparing it on the
// pool if needed; nil when it cannot (the cache is full, or the query does
// not prepare: running it unprepared then reports the error). It takes a
// connection of the pool: it must not be called while the caller holds the
// pool's last one (inside a write transaction on the single writer).
func (sc *stmtCache) prepare(ctx context.Context, query string) *sql.Stmt {
	if st := sc.cached(query); st != nil {
		return st
	}
	sc.mu.RLock()
	full := len(sc.m) >= maxCachedStatements
	sc.mu.RUnlock()
	if full {
		return nil
	}
	// Prepared without holding the lock: preparing waits for a connection,
	// which a transaction may hold while it looks up its own statements.
	st, err := sc.db.PrepareContext(context.WithoutCancel(ctx), query)
	if err != nil {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if had := sc.m[query]; had != nil {
		st.Close() // prepared twice at once: keep the first
		return had
	}
	sc.m[query] = st
	return st
}

// close closes every cached statement.
func (sc *stmtCache) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for q, st := range sc.m {
		st.Close()
		delete(sc.m, q)
	}
}

// txStmts is the statement cache as a write transaction sees it: cached
// statements are bound to the transaction; a query not cached yet runs
// unprepared and is remembered, to be prepared once the transaction has
// given the writer's connection back.
type txStmts struct {
	cache  *stmtCache
	tx     *sql.Tx
	missed []string
}

func (ts *txStmts) stmt(ctx context.Context, query string) *sql.Stmt {
	st := ts.cache.cached(query)
	if st == nil {
		ts.missed = append(ts.missed, query)
		return nil
	}
	return ts.tx.StmtContext(ctx, st)
}

// prepareMissed prepares the statements the transaction ran unprepared.
func (ts *txStmts) prepareMissed(ctx context.Context) {
	for _, q := range ts.missed {
		ts.cache.prepare(ctx, q)
	}
}
