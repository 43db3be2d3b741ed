package migrations

import (
	"bytes"
	"io/fs"
	"path"
)

// On a Galera cluster (MariaDB Galera, Percona XtraDB Cluster) MariaDB
// refuses a sequence that caches values unless it steps by the cluster's
// auto-increment settings (INCREMENT BY 0): version 1's forupdate token
// sequence fails there with error 1235 and leaves the history dirty. The
// sequence is unused on a cluster (forupdate refuses to lock there:
// forupdate.ErrMultiPrimary), so on a Galera node Up creates it in the form
// the cluster accepts. The SQL files that Files returns are the plain
// ones: teams that migrate a cluster with another tool change that one
// statement the same way.
const (
	galeraFile     = "mysql/000001_init.up.sql"
	galeraSequence = `'CREATE SEQUENCE IF NOT EXISTS dblock_forupdate_tokens CACHE 1000'`
	galeraAccepted = `'CREATE SEQUENCE IF NOT EXISTS dblock_forupdate_tokens INCREMENT BY 0 CACHE 1000'`
)

// galeraFiles is fsys with the sequence statement in the form a Galera
// cluster accepts.
type galeraFiles struct{ fsys fs.FS }

func (g galeraFiles) Open(name string) (fs.File, error) {
	f, err := g.fsys.Open(name)
	if err != nil || path.Clean(name) != galeraFile {
		return f, err
	}
	defer f.Close()
	text, err := fs.ReadFile(g.fsys, name)
	if err != nil {
		return nil, err
	}
	text = bytes.Replace(text, []byte(galeraSequence), []byte(galeraAccepted), 1)
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: bytes.NewReader(text), info: sizedInfo{info, int64(len(text))}}, nil
}

// ReadDir is fsys's (iofs lists the files through it).
func (g galeraFiles) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(g.fsys, name) }

// memFile is a file read from memory.
type memFile struct {
	*bytes.Reader
	info fs.FileInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

// sizedInfo is a file's info with another size.
type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (i sizedInfo) Size() int64 { return i.size }
