package api

import (
	"context"
	"net/url"
	"strconv"
)

// ListOptions selects a page of GET /locks.
type ListOptions struct {
	// Prefix keeps only the keys that start with it ("" = all).
	Prefix string
	// After starts the page after this key: the last key of the previous
	// page ("" = from the first key).
	After string
	// Limit is the page size, 1 to 10,000 (0 = the server's default, 100);
	// a negative Limit is refused (ErrInvalidArgument) without a request.
	Limit int
}

// ListPage returns one page of the locks (GET /locks?prefix=&after=&limit=),
// sorted by key; LockList.Total counts every key that matches Prefix, on
// every page. To walk all keys, call it again with After set to the last
// key returned until a page comes back with fewer than Limit entries.
// Errors as Status; a negative Limit is ErrInvalidArgument (Field limit),
// and nothing is sent.
func (c *Client) ListPage(ctx context.Context, o ListOptions) (*LockList, error) {
	if o.Limit < 0 {
		// It would be sent as no limit: the server's default page.
		return nil, invalidArgument("limit", "must not be negative (0: the server's default page), got %d", o.Limit)
	}
	q := url.Values{}
	if o.Prefix != "" {
		q.Set("prefix", o.Prefix)
	}
	if o.After != "" {
		q.Set("after", o.After)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	u := url.URL{Path: "/locks", RawQuery: q.Encode()}
	var l LockList
	if err := c.getJSON(ctx, u.RequestURI(), &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// EventsOptions selects the events of GET /events.
type EventsOptions struct {
	// Since returns only the events with a Seq above it (0 = the last 100).
	Since uint64
	// Key keeps only the events of this lock key ("" = every event,
	// cluster events included).
	Key string
}

// Events returns the node's recent events (GET /events?since=&key=),
// oldest first, and the Seq to pass as Since next time (EventList.Last).
// It asks the node the next connection leads to: each node keeps its own
// feed, and a standby's holds the changes it replicated. Errors as Status.
func (c *Client) Events(ctx context.Context, o EventsOptions) (*EventList, error) {
	q := url.Values{}
	if o.Since > 0 {
		q.Set("since", strconv.FormatUint(o.Since, 10))
	}
	if o.Key != "" {
		q.Set("key", o.Key)
	}
	u := url.URL{Path: "/events", RawQuery: q.Encode()}
	var l EventList
	if err := c.getJSON(ctx, u.RequestURI(), &l); err != nil {
		return nil, err
	}
	return &l, nil
}
