package postgres

import (
	"github.com/jackc/pgx/v5/pgtype"
)

// array is a one-dimensional array argument that pgx encodes without an
// allocation per element. A plain slice ([]string, []pgtype.Timestamptz) is
// encoded through its elements as interface values, and each string or
// struct put in an interface is a heap allocation: one per column of every
// run in the batches a burn-down writes. array's elements are handed to pgx
// as pointers (P), which an interface holds without allocating, and are
// encoded through the valuer interfaces of pgtype that P implements
// (pgtype.TextValuer, pgtype.TimestamptzValuer, pgtype.Int64Valuer,
// pgtype.BoolValuer, pgtype.BytesValuer).
type array[E any, P interface{ *E }] []E

// Dimensions is pgtype.ArrayGetter: one dimension, or an empty array.
func (a array[E, P]) Dimensions() []pgtype.ArrayDimension {
	if len(a) == 0 {
		return []pgtype.ArrayDimension{}
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

// Index is pgtype.ArrayGetter: a pointer to element i.
func (a array[E, P]) Index(i int) any { return P(&a[i]) }

// IndexType is pgtype.ArrayGetter.
func (a array[E, P]) IndexType() any { return P(new(E)) }

// The element types of array arguments. pgtype's own types (Text,
// Timestamptz, Int4, Int8, Bool) are valuers themselves and serve for
// nullable columns.
type (
	textArray = array[text, *text]
	tsArray   = array[pgtype.Timestamptz, *pgtype.Timestamptz]
	int4Array = array[pgtype.Int4, *pgtype.Int4]
	int8Array = array[pgtype.Int8, *pgtype.Int8]
	boolArray = array[pgtype.Bool, *pgtype.Bool]
	nullArray = array[pgtype.Text, *pgtype.Text]
	byteArray = array[bytea, *bytea]
)

// text is a non-null element of a text[] argument.
type text string

// TextValue is pgtype.TextValuer.
func (t *text) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*t), Valid: true}, nil
}

// bytea is a non-null element of a bytea[] argument.
type bytea []byte

// BytesValue is pgtype.BytesValuer.
func (b *bytea) BytesValue() ([]byte, error) {
	if *b == nil {
		return []byte{}, nil // an empty value, not NULL
	}
	return *b, nil
}

// int4Of is n as an element of an int4[] argument.
func int4Of(n int) pgtype.Int4 { return pgtype.Int4{Int32: int32(n), Valid: true} }

// boolOf is b as an element of a bool[] argument.
func boolOf(b bool) pgtype.Bool { return pgtype.Bool{Bool: b, Valid: true} }

// textsOf is ss as a text[] argument.
func textsOf(ss []string) textArray {
	a := make(textArray, len(ss))
	for i, s := range ss {
		a[i] = text(s)
	}
	return a
}
