// Package lanehttp serves HTTP requests through the lanes of a
// [lanequeue.Queue]: a middleware takes a request's lanes (for a key and
// with options that are functions of the request) before the handler runs,
// releases them when it returns (telling the lanes' observers how it
// answered), and answers the requests the lanes refuse with 429 Too Many
// Requests or 503 Service Unavailable and a Retry-After.
// Besides the module's own packages it uses the standard library only.
//
//	q := lanequeue.Default[string](16)
//	chat, _ := q.Lanes("session", "global")
//	h := lanehttp.Handler(lanehttp.Config[string]{
//		Queue: q, Lanes: chat,
//		Key: func(r *http.Request) (string, error) {
//			if s := r.Header.Get("X-Session"); s != "" {
//				return s, nil
//			}
//			return "", errors.New("no X-Session header") // 400, not one shared session ""
//		},
//	}, chatHandler)
//
// Keys: a key comes from the request, so a client chooses it, and a keyed
// lane keeps a key's entry (the key's bytes with it) while it is idle:
// up to keyedsem.WithMaxKeys idle keys (default 4096) for the idle timeout
// (default an hour). The middleware refuses a key longer than
// [Config.MaxKeyBytes] (default [DefaultMaxKeyBytes], 256) with 400 Bad
// Request before it reaches any lane, so the idle keys' bytes are bounded
// by WithMaxKeys × MaxKeyBytes: 4096 × 256 B = 1 MiB with the defaults,
// plus about a hundred bytes of entry per key (a string key is copied
// once checked, so one cut from a longer header keeps none of the rest;
// a struct key's strings are Key's to copy, see [Config.MaxKeyBytes]). It answers 400 and not 431
// Request Header Fields Too Large because it cannot know where Key found
// the key (a header, the path, a cookie, the body); [Config.Reject] is
// given [ErrKeyTooLong] and may answer 431 when the key is a header.
//
// Body: a key or options that come from the request's body (a webhook's
// JSON with its thread, message number and tenant) are read from it once,
// by a [Decoder] set as [Config.Decode]. The middleware reads the body
// whole, at most [Config.MaxBodyBytes] (default [DefaultMaxBodyBytes],
// 1 MiB; a longer body is answered 413 Content Too Large, refused by its
// Content-Length before a byte is read when it declares one), decodes it,
// and gives Key, Options and then the handler a request whose context
// carries the value ([Decoder.From]) and whose Body reads the same bytes
// from their start. The body is read before the request joins any line,
// so a slow upload holds no lane, and a request refused for its body (413,
// or 400 when it does not read or decode) leaves nothing in any lane. A
// request keeps its body from the read until its handler returns, waiting
// in line included: the lines' bounds (keyedsem.WithMaxWaitersPerKey,
// semaphore.WithMaxWaiters) and the server's connections bound the bodies
// held.
//
// Outcomes: the middleware ends each request's ticket with
// [lanequeue.Ticket.Finish], telling the observers of its lanes
// ([lanequeue.Queue.ObserveLane], such as an adaptive.Controller driving
// the global lane) the handler's outcome: by default ([DefaultOutcome])
// its answers of 429 and 503 are overloads and lower an adaptive lane's
// limit, with no code in the handler. [Config.Outcome] maps statuses
// otherwise.
//
// Order: one key's requests run in the order they join the key's line,
// one at a time with the default keyed lane. A request's place is taken
// when its handler is called, so requests that race to the server join in
// the order the server reads them; give the keyed lane
// keyedsem.WithSequenceOrder and each request its number (Options
// returning semaphore.Sequence) to serve a key's waiting requests in
// their clients' order instead, and keyedsem.WithReorderHold(d) to hold a
// request whose predecessor has not arrived yet, up to d.
//
// Cancellation: a request waits with its own context: a client that goes
// away (the server cancels the request's context) leaves the line at
// once, and its handler is never called. A context with a deadline (set by
// a middleware before this one) bounds the wait.
//
// Shutdown: [lanequeue.Queue.Drain] after (or with) http.Server.Shutdown
// lets the requests admitted finish and answers later ones with 503. A
// handler's own calls on the queue with its request's context (which
// carries the request's ticket), such as a model call on another lane,
// are part of its request and are served during the drain.
//
// Calls out to a provider: [RetryAfter] reads how long a provider's
// response asks to wait (retry-after-ms, Retry-After, and the rate limits'
// reset headers), and a [Classifier] ([DefaultClassifier] unless replaced)
// makes a [Verdict] of each attempt: retry or not, overload or not, and
// after how long.
//
// Transport: a [Transport] (made by [NewTransport] from a
// [TransportConfig]) is the http.RoundTripper of a gateway's client for a
// provider. Each attempt of a request takes the lanes of
// [TransportConfig.Lanes] with [lanequeue.Queue.AcquireAll] and the
// request's context, as the middleware does, taking the request's token
// estimate of the tokens lane and 1 of the others. The same queue may
// serve both, but give the Transport lanes of its own: a handler's call
// holds its request's lanes, so a global lane that both take needs two
// permits a request. When its capacity cannot hold both for one request
// the call fails with lanequeue.ErrReentrant; under load, with every
// permit held by a handler whose call waits for another, the calls wait
// for each other until their deadlines. A lane's refusal (a full line, a
// closed or draining queue) is returned as AcquireAll's error and is not
// retried. A call that waits to retry holds no lanes, so a
// [lanequeue.Queue.Drain] does not wait for it (unless its context carries
// a ticket of the queue, as a handler's does: the retry is then admitted
// as the ticket's work), and its wait ends when the drain begins or the
// queue closes ([lanequeue.Queue.Stopping]; a call whose context carries
// a ticket waits its time out); when the lanes refuse the retry (a
// drained queue, a full line), it is not sent, and the caller gets the
// answer retried, whose body is kept in memory while the call waits if it
// is at most 8 KiB long (an answer with a longer body, or an attempt that
// failed with an error, gives the lanes' error instead). The attempt that answers the
// caller holds its lanes until its response's Body is closed (the first
// Close releases them; a second is harmless); one that fails with an
// error, or is retried, gives them back at once. Either way its lanes'
// observers are told its outcome first: the verdict's overloads
// (429, 503, 529 by default) as adaptive.ErrOverload, which lowers an
// adaptive lane's limit. An overload that carries a retry time also pauses
// the set's global and rate lanes for that long, for every caller
// ([lanequeue.Queue.Cooldown]): one 429 holds back the whole gateway's
// calls to the provider, not only the retries of the call that got it
// (keyed lanes, which other work of a key may share, are not paused). When
// the verdict says an overload was of the tokens ([Verdict].TokensSpent),
// with a retry time or without, the TokensLane is also told its window is
// spent ([lanequeue.Queue.Exhaust]), which a token lane counts full.
//
// A token budget is settled after the call: with a
// [TransportConfig.Usage] and a TokensLane made by
// [lanequeue.NewTokenLane], the body keeps the last 16 KiB the
// caller reads (the caller reads it unchanged; nothing more is kept) and,
// at its EOF or at an earlier Close, Usage reads the call's token count
// from them ([UsageJSON] reads OpenAI's and Anthropic's answers and
// streams). The ticket is settled to that count before the lanes are
// released ([lanequeue.Ticket.Settle]: a debt later calls wait out, or a
// refund); an answer without a count, or one closed early with a count
// not above the estimate, leaves the estimate charged, as does a
// negative count or a settle the lane refuses (a count out of range, a
// fleet lane's failed call), whose error the body's Close returns.
//
// An attempt is retried when the verdict says Retry and the request
// gets another: it is under [TransportConfig.MaxAttempts]; its body can
// be read again (no body, or GetBody set, as http.NewRequest sets it
// for an in-memory body: a request with a body and no GetBody gets one
// attempt); it is safe to send twice (an idempotent method or an
// Idempotency-Key header) or the provider cannot have processed it (an
// overload refused it, or its dial failed) or
// [TransportConfig.RetryUnsafe] is set; the retry budget holds a retry
// (each request earns RetryRatio, the budget keeps at most RetryBurst:
// over any stretch, retries are at most RetryBurst + RetryRatio ×
// requests, so a storm of failures does not multiply the load); and
// the wait ends before the context's deadline. Otherwise the caller gets
// the attempt's response (a 429, say, not an error) or error. The wait
// before the n-th retry is max(After, step/2) plus a jitter uniform in
// [0, step/2], where After is the provider's retry time (see
// [RetryAfter]; at most [MaxRetryAfter]) and step is Backoff doubled n-1
// times, at most MaxBackoff: never sooner than the provider asked, never
// in step with other callers, never longer than max(MaxRetryAfter,
// MaxBackoff/2) + MaxBackoff/2. The context bounds every wait: when it ends, in line for
// a lane, between attempts or during one, RoundTrip returns its error
// and nothing is held.
package lanehttp
