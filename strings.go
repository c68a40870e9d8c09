package zaris

import (
	"errors"
	"math/big"

	"github.com/zaris-go/zaris/internal/longdouble"
)

// The string commands beyond get, put and incr, on the store: what IncrByFloat, Append, SetRange,
// GetAndDelete, GetAndExpire and GetAndPersist do, with Redis's INCRBYFLOAT, APPEND, SETRANGE, GETDEL and
// GETEX semantics.

// Why a string command was refused. The reply is StatusInvalidRequest with Int set to one of the refusal
// codes, so that the RESP endpoint can answer as Redis does.
var (
	errNotFloat    = errors.New("not a valid float")
	errNotFinite   = errors.New("not finite")
	errValueTooBig = errors.New("value too large")
)

// incrByFloat adds the long double written in delta to key's value, a missing key counting as 0, keeping
// its expiry, and stores the sum as Redis writes it. It returns the text stored. It writes nothing and
// returns errNotFloat when the value or delta is not a float, errNotFinite when the sum would not be finite,
// and errValueTooBig when its text would be longer than limit.
func (s *store) incrByFloat(segment int, key string, delta []byte, limit int) ([]byte, error) {
	var result []byte
	var err error
	s.update(segment, key, func(cur *entry, _ int64) (*entry, bool) {
		base, baseInf, expireAt := new(big.Float), false, int64(0)
		if cur != nil && cur.coll() != nil {
			err = errWrongType
			return nil, false
		}
		if cur != nil {
			var ok bool
			if base, baseInf, ok = longdouble.Parse(cur.value()); !ok {
				err = errNotFloat
				return nil, false
			}
			expireAt = cur.expiry()
		}
		incr, incrInf, ok := longdouble.Parse(delta)
		if !ok {
			err = errNotFloat
			return nil, false
		}
		sum, finite := longdouble.Add(base, incr)
		if baseInf || incrInf || !finite {
			err = errNotFinite
			return nil, false
		}
		text := longdouble.Format(sum)
		if len(text) > limit {
			err = errValueTooBig
			return nil, false
		}
		result = text
		return newStringEntry(key, result, 0, expireAt), true
	})
	return result, err
}

// editableString returns the value and expiry of cur, a string entry or nil for none, that an edit of the
// value starts from, or errWrongType when cur holds a collection.
func editableString(cur *entry) (value []byte, expireAt int64, err error) {
	switch {
	case cur == nil:
		return nil, 0, nil
	case cur.coll() != nil:
		return nil, 0, errWrongType
	}
	return cur.value(), cur.expiry(), nil
}

// appendValue appends suffix to key's value, creating the key when it is missing and keeping its expiry
// otherwise. It returns the value's new length, or errValueTooBig, writing nothing, when that would exceed
// limit.
func (s *store) appendValue(segment int, key string, suffix []byte, limit int) (int, error) {
	var length int
	var err error
	s.update(segment, key, func(cur *entry, _ int64) (*entry, bool) {
		var prefix []byte
		var expireAt int64
		if prefix, expireAt, err = editableString(cur); err != nil {
			return nil, false
		}
		length = len(prefix) + len(suffix)
		if length > limit {
			err = errValueTooBig
			return nil, false
		}
		e, value := newSizedEntry(key, length, 0, expireAt)
		copy(value[copy(value, prefix):], suffix)
		return e, true
	})
	return length, err
}

// setRange overwrites key's value from offset with part, padding with zero bytes past the value's end,
// creating the key when it is missing and keeping its expiry otherwise. It returns the value's new length,
// or errValueTooBig, writing nothing, when that would exceed limit.
func (s *store) setRange(segment int, key string, offset int64, part []byte, limit int) (int, error) {
	if offset > int64(limit-len(part)) {
		return 0, errValueTooBig
	}
	end := int(offset) + len(part)
	var length int
	var err error
	s.update(segment, key, func(cur *entry, _ int64) (*entry, bool) {
		var old []byte
		var expireAt int64
		if old, expireAt, err = editableString(cur); err != nil {
			return nil, false
		}
		e, value := newSizedEntry(key, max(len(old), end), 0, expireAt) // zero bytes pad past old's end
		copy(value, old)
		copy(value[offset:], part)
		length = len(value)
		return e, true
	})
	return length, err
}

// getDel deletes key and returns the live value it held. It refuses a collection with errWrongType.
func (s *store) getDel(segment int, key string) (value []byte, found bool, err error) {
	s.update(segment, key, func(cur *entry, _ int64) (*entry, bool) {
		if cur == nil {
			return nil, false
		}
		if cur.coll() != nil {
			err = errWrongType
			return nil, false
		}
		value, found = cur.value(), true
		return nil, true
	})
	return value, found, err
}

// getEx returns key's live value and changes its expiry as ask says: a deadline that has passed deletes
// the key, and the zero ask removes the expiry, unless keep asks to leave it as it is. It reports
// whether it wrote. It refuses a collection with errWrongType.
func (s *store) getEx(segment int, key string, ask expiryAsk, keep bool) (value []byte, found, written bool, err error) {
	s.update(segment, key, func(cur *entry, now int64) (*entry, bool) {
		if cur == nil {
			return nil, false
		}
		if cur.coll() != nil {
			err = errWrongType
			return nil, false
		}
		value, found = cur.value(), true
		if ask == (expiryAsk{}) {
			if keep || cur.expiry() == 0 {
				return nil, false
			}
			written = true
			return newStringEntry(key, cur.value(), 0, 0), true
		}
		written = true
		if at, passed := ask.deadline(now); !passed {
			return newStringEntry(key, cur.value(), 0, at), true
		}
		return nil, true
	})
	return value, found, written, err
}

// typeName names the kind of value e holds, as Redis's TYPE does: "none" for no live entry. It is the one
// place that maps a stored entry to its kind's name.
func typeName(e *entry) string {
	if e == nil {
		return "none"
	}
	return e.kind().String()
}
