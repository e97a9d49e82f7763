package client

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tessera-tsdb/tessera/placement"
)

func own(id string, st placement.ShardState, src string) placement.Owner {
	return placement.Owner{InstanceID: id, State: st, SourceID: src}
}

const (
	A = placement.Available
	I = placement.Initializing
	L = placement.Leaving
)

func TestWriteQuorum(t *testing.T) {
	steady := []placement.Owner{own("a", A, ""), own("b", A, ""), own("c", A, "")}
	moving := []placement.Owner{own("a", A, ""), own("b", A, ""), own("c", L, ""), own("d", I, "c")}
	for _, tc := range []struct {
		name     string
		owners   []placement.Owner
		level    WriteLevel
		pairing  bool
		acks     []string
		fails    []string
		ok       bool
		possible bool
	}{
		{"one of three", steady, WriteOne, true, []string{"a"}, []string{"b", "c"}, true, true},
		{"majority needs two", steady, WriteMajority, true, []string{"a"}, []string{"b"}, false, true},
		{"majority met", steady, WriteMajority, true, []string{"a", "c"}, []string{"b"}, true, true},
		{"majority impossible", steady, WriteMajority, true, []string{"a"}, []string{"b", "c"}, false, false},
		{"all needs three", steady, WriteAll, true, []string{"a", "b"}, []string{"c"}, false, false},
		{"all met", steady, WriteAll, true, []string{"a", "b", "c"}, nil, true, true},
		{"initializing alone does not count", moving, WriteMajority, true, []string{"a", "d"}, []string{"b", "c"}, false, false},
		{"leaving alone does not count", moving, WriteMajority, true, []string{"a", "c"}, []string{"b", "d"}, false, false},
		{"pair counts one", moving, WriteMajority, true, []string{"a", "c", "d"}, []string{"b"}, true, true},
		{"pair without pairing option", moving, WriteMajority, false, []string{"a", "c", "d"}, []string{"b"}, false, false},
		{"available majority while moving", moving, WriteMajority, false, []string{"a", "b"}, []string{"c", "d"}, true, true},
		{"all while moving needs pair", moving, WriteAll, true, []string{"a", "b", "c"}, []string{"d"}, false, false},
		{"all while moving with pair", moving, WriteAll, true, []string{"a", "b", "c", "d"}, nil, true, true},
		{"pending can still make it", moving, WriteMajority, true, []string{"a"}, []string{"b"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewWriteQuorum(tc.owners, 3, tc.level, tc.pairing)
			for _, id := range tc.acks {
				q.Record(id, true)
			}
			for _, id := range tc.fails {
				q.Record(id, false)
			}
			require.Equal(t, tc.ok, q.Satisfied())
			require.Equal(t, tc.possible, q.Possible())
		})
	}
}

func TestReadQuorum(t *testing.T) {
	steady := []placement.Owner{own("a", A, ""), own("b", A, ""), own("c", A, "")}
	moving := []placement.Owner{own("a", A, ""), own("b", A, ""), own("c", L, ""), own("d", I, "c")}
	for _, tc := range []struct {
		name   string
		owners []placement.Owner
		level  ReadLevel
		acks   []string
		fails  []string
		ok     bool
	}{
		{"one", steady, ReadOne, []string{"b"}, nil, true},
		{"unstrict waits for majority while others pending", steady, ReadUnstrictMajority, []string{"a"}, nil, false},
		{"unstrict settles for one when others failed", steady, ReadUnstrictMajority, []string{"a"}, []string{"b", "c"}, true},
		{"unstrict majority", steady, ReadUnstrictMajority, []string{"a", "b"}, nil, true},
		{"unstrict none", steady, ReadUnstrictMajority, nil, []string{"a", "b", "c"}, false},
		{"strict majority fails with one", steady, ReadMajority, []string{"a"}, []string{"b", "c"}, false},
		{"all", steady, ReadAll, []string{"a", "b", "c"}, nil, true},
		{"leaving counts for reads", moving, ReadMajority, []string{"a", "c"}, []string{"b"}, true},
		{"initializing never counts for reads", moving, ReadMajority, []string{"a", "d"}, []string{"b", "c"}, false},
		{"unstrict settled ignores initializing", moving, ReadUnstrictMajority, []string{"c"}, []string{"a", "b"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewReadQuorum(tc.owners, 3, tc.level)
			for _, id := range tc.acks {
				q.Record(id, true)
			}
			for _, id := range tc.fails {
				q.Record(id, false)
			}
			require.Equal(t, tc.ok, q.Satisfied())
		})
	}
}

func TestParseLevels(t *testing.T) {
	for s, want := range map[string]WriteLevel{"one": WriteOne, "majority": WriteMajority, "ALL": WriteAll} {
		got, err := ParseWriteLevel(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ParseWriteLevel("most")
	require.Error(t, err)
	for s, want := range map[string]ReadLevel{"one": ReadOne, "unstrict_majority": ReadUnstrictMajority, "majority": ReadMajority, "all": ReadAll} {
		got, err := ParseReadLevel(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}
