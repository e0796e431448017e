#ifndef AGRIPPA_PROXY_H
#define AGRIPPA_PROXY_H

/*
 * proxy.c: the only process that talks to model providers (DESIGN.md
 * section 1).  It holds the providers' API keys, handed over by the
 * supervisor in PROXY_CONF; serves one channel per runner (PROXY_CHANNEL,
 * tagged with the run), on which MODEL_CALL asks for one model call; makes
 * the call with libcurl's multi interface on libevent, retrying 429, 5xx,
 * transport errors and malformed answers with backoff (honouring
 * retry-after); records the call's usage and cost for the run; and answers
 * MODEL_REPLY.  wire.c turns the neutral conversation into each provider's
 * wire format and back.
 */
__attribute__((noreturn)) void proxy_main(void);

#define PROXY_CONNECT_TIMEOUT_S 30
#define PROXY_BACKOFF_MS 1000        /* first retry delay; doubles, with jitter */
#define PROXY_RETRY_AFTER_MAX_S 300  /* a longer retry-after fails the call instead */
#define PROXY_CALLS_MAX 64           /* calls in flight on one runner's channel */
#define PROXY_ANTHROPIC_VERSION "2023-06-01"

#endif
