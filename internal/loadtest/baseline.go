package loadtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	_ "modernc.org/sqlite" // the "sqlite" driver, as the store uses it
)

// ServeBaselineHTTP is the metadata baseline: a bare net/http server whose
// one handler writes body with the metadata's Content-Type and length,
// doing nothing else. It logs its address as the server does and serves
// until ctx ends.
func ServeBaselineHTTP(ctx context.Context, addr string, body []byte, log *slog.Logger) error {
	length := strconv.Itoa(len(body))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", length)
		w.Write(body)
	})
	return serveBaseline(ctx, addr, "baseline", &http.Server{Handler: h}, log)
}

// BaselineWSFrame is what the bare WebSocket server answers to a client's
// first message: about the size of the gateway's `linked` frame.
var BaselineWSFrame = []byte(`{"type":"linked","id":"s-00000000-1","data":{"terminalId":"10000001"}}`)

// ServeBaselineWS is the sessions baseline: a bare gorilla WebSocket server
// with the gateway's buffer settings (1 KiB read buffer, 1 KiB write buffer
// from a pool) and one read loop per connection; it answers a client's
// first message with BaselineWSFrame and otherwise only holds the
// connection. It serves until ctx ends.
func ServeBaselineWS(ctx context.Context, addr string, log *slog.Logger) error {
	var pool sync.Pool
	up := websocket.Upgrader{
		ReadBufferSize: 1024, WriteBufferSize: 1024, WriteBufferPool: &pool,
		CheckOrigin: func(*http.Request) bool { return true },
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			answered := false
			for {
				if _, _, err := conn.NextReader(); err != nil {
					return
				}
				if !answered {
					answered = true
					if conn.WriteMessage(websocket.TextMessage, BaselineWSFrame) != nil {
						return
					}
				}
			}
		}()
	})
	return serveBaseline(ctx, addr, "baseline", &http.Server{Handler: h}, log)
}

func serveBaseline(ctx context.Context, addr, name string, srv *http.Server, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("listening", "surface", name, "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		srv.Close()
		return nil
	case err := <-errc:
		return err
	}
}

// baselineProc is a running baseline server (a child process).
type baselineProc struct {
	child *child
	addr  string
}

func (b *baselineProc) stats() (procStats, error) { return readProc(b.child.cmd.Process.Pid) }

// startBaseline starts `instore loadtest baseline KIND args...`.
func (e *env) startBaseline(kind string, args ...string) (*baselineProc, error) {
	a := append(append(append([]string{}, e.o.BaselineArgs...), kind), args...)
	a = append(a, "--listen", "127.0.0.1:0")
	c, err := startChild(e.o.Exe, a, nil, filepath.Join(e.dir, "baseline-"+kind+".log"))
	if err != nil {
		return nil, err
	}
	addrs, err := c.waitListening([]string{"baseline"}, 30*time.Second)
	if err != nil {
		c.stop(5 * time.Second)
		return nil, err
	}
	return &baselineProc{child: c, addr: addrs["baseline"]}, nil
}

// dbCPU reads the CPU time of PostgreSQL when the store is a PostgreSQL
// on this machine (nil otherwise).
func (e *env) dbCPU() func() (cpuSnapshot, error) {
	if e.backend != "postgres" {
		return nil
	}
	u, err := url.Parse(e.dbURL)
	if err != nil || loopbackURL("http://"+u.Host) != nil {
		return nil
	}
	return func() (cpuSnapshot, error) { return processCPU("postgres") }
}

// commitWriters is how many goroutines commit concurrently in the commit
// baseline: the store's own bound on concurrent writes (one SQLite writer
// connection; a PostgreSQL write pool of 16 per node).
func (e *env) commitWriters() int {
	if e.backend == "postgres" {
		return 16
	}
	return 1
}

// commitBaseline is the purchase baseline's store: a table of its own
// that nothing of the server reads or writes, and the op that commits one
// row into it.
type commitBaseline struct {
	op    op
	table string
	path  string // SQLite: the database file ("" with PostgreSQL)
	once  sync.Once
	drop  func()
}

// close drops the table (PostgreSQL) or removes the file (SQLite).
func (c *commitBaseline) close() { c.once.Do(c.drop) }

// newCommitBaseline prepares the purchase baseline: single-row commits on
// the same backend and durability as the store, with as many concurrent
// writers as the store allows (the op's workers). SQLite writes a file of
// its own in the same directory (WAL, same synchronous, BEGIN IMMEDIATE,
// one connection, the store's driver); PostgreSQL a table of its own in
// the same schema, without autovacuum (its upkeep would land in either
// side's windows). Each commit inserts one row about the size of a
// transaction row. The table is not the store's transactions table, so
// the commits per life (countCommits) do not see it; close removes it.
func (e *env) newCommitBaseline(ctx context.Context) (*commitBaseline, error) {
	suffix := make([]byte, 4)
	rand.Read(suffix)
	c := &commitBaseline{table: "loadtest_commits_" + hex.EncodeToString(suffix)}
	var db *sql.DB
	var err error
	create := "CREATE TABLE " + c.table + ` (id TEXT PRIMARY KEY, merchant_id TEXT NOT NULL,
		amount BIGINT NOT NULL, status_id INTEGER NOT NULL, created_at BIGINT NOT NULL, payload TEXT NOT NULL)`
	ins := "INSERT INTO " + c.table + " VALUES (?, ?, ?, ?, ?, ?)"
	if e.backend == "postgres" {
		create += " WITH (autovacuum_enabled = false)"
		ins = "INSERT INTO " + c.table + " VALUES ($1, $2, $3, $4, $5, $6)"
		db, err = sql.Open("pgx", e.dbURL)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(e.commitWriters())
		db.SetMaxIdleConns(e.commitWriters())
		c.drop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			db.ExecContext(ctx, "DROP TABLE IF EXISTS "+c.table)
			db.Close()
		}
	} else {
		dir := e.dataDir
		if dir == "" {
			dir = e.dir
		}
		c.path = filepath.Join(dir, c.table+".db")
		q := url.Values{}
		q.Set("_busy_timeout", "5000")
		q.Set("_synchronous", e.o.Synchronous)
		q.Set("_txlock", "immediate")
		db, err = sql.Open("sqlite", c.path+"?"+q.Encode())
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		c.drop = func() {
			db.Close()
			for _, s := range []string{"", "-wal", "-shm"} {
				os.Remove(c.path + s)
			}
		}
		var mode string
		if err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
			c.close()
			return nil, fmt.Errorf("commit baseline: journal_mode: %v %s", err, mode)
		}
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		c.close()
		return nil, fmt.Errorf("commit baseline: %w", err)
	}
	payload := strings.Repeat("x", 200)
	var seq atomic.Int64
	c.op = op{
		name: "raw commits", unit: "commits/s", workers: e.commitWriters(),
		fn: func(ctx context.Context, w int) error {
			id := fmt.Sprintf("txn_%s_%d", e.runID, seq.Add(1))
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, ins, id, "mer_loadtest", 1000, 14, time.Now().UnixMicro(), payload); err != nil {
				tx.Rollback()
				return err
			}
			return tx.Commit()
		},
	}
	return c, nil
}

// storeDB opens the server's store directly (PostgreSQL: the run's schema;
// SQLite: its file, with the driver's query parameters sqliteParams).
func (e *env) storeDB(sqliteParams string) (*sql.DB, error) {
	if e.backend == "postgres" {
		return sql.Open("pgx", e.dbURL)
	}
	return sql.Open("sqlite", filepath.Join(e.dataDir, "instore.db")+"?"+sqliteParams)
}

// countCommits reads, after a run, how many commits a completed life made:
// each of its transactions is one row, inserted at version 1, and every
// committed change of it adds one to its version. A life is a transaction
// that acts on none (the purchase, or the pre-auth); an approved
// INCREMENT, CAPTURE or VOID changes its pre-auth in the commit of its
// result (a pair: two versions, one commit), so those are taken off.
func (e *env) countCommits(ctx context.Context) (lives int64, perLife float64, err error) {
	db, err := e.storeDB("_query_only=on&_busy_timeout=5000")
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	var sum, pairs sql.NullInt64
	err = db.QueryRowContext(ctx, `SELECT COALESCE(SUM(CASE WHEN original_id IS NULL THEN 1 ELSE 0 END), 0), SUM(version),
		SUM(CASE WHEN type IN ('INCREMENT', 'CAPTURE', 'VOID') AND status_id = 0 THEN 1 ELSE 0 END)
		FROM transactions WHERE completed_at IS NOT NULL AND merchant_id = `+
		placeholder(e.backend), e.merchantID).Scan(&lives, &sum, &pairs)
	if err != nil {
		return 0, 0, fmt.Errorf("count commits: %w", err)
	}
	if lives == 0 {
		return 0, 0, errors.New("count commits: no completed life")
	}
	return lives, float64(sum.Int64-pairs.Int64) / float64(lives), nil
}

func placeholder(backend string) string {
	if backend == "postgres" {
		return "$1"
	}
	return "?"
}
