/*
 * The tool server: agrippa-sandbox, pid 1 of a run's sandbox.
 *
 * Start-up: SBX_HELLO from the supervisor (written before the channel was
 * handed to the driver), the workspace root opened, then the seccomp filter
 * (privsep/seccomp_sandbox.c), then SBX_READY to the driver.  Every request
 * gets exactly one terminal reply echoing its id.  The process exits when
 * the driver hangs up; being pid 1, its exit ends the whole sandbox.
 */
#include <sys/stat.h>

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "privsep/privsep.h"
#include "sandbox/sandbox.h"

#define SBX_HELLO_TIMEOUT_MS 10000
#define SBX_LIST_MAX 10000   /* entries in one list/glob reply */
#define SBX_GREP_MAX 10000   /* matches in one grep reply */
#define SBX_FRAME_SLACK 4096 /* envelope and fields around a read's bytes */

static struct tools tools;

void
tools_send(struct tools *t, struct ipc_wbuf *w)
{
	if (ipc_wbuf_finish(w, IPC_MAX_FRAME_DEFAULT) == -1 || ipc_chan_send(t->chan, w, -1) == -1)
		fatalx("cannot send a reply to the driver");
	ipc_wbuf_free(w);
}

void
tools_reply_error(struct tools *t, uint64_t id, int code, const char *msg)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_SBX_RESULT, id, 3);
	ipc_put_u64(&w, (uint64_t)code);
	ipc_put_strn(&w, msg, strnlen(msg, IPC_ERRMSG_MAX));
	ipc_put_nil(&w);
	tools_send(t, &w);
}

/* Begin an SBX_RESULT with code 0; the caller appends exactly one data value. */
static void
tools_ok_begin(struct ipc_wbuf *w, uint64_t id)
{
	ipc_wbuf_begin(w, IMSG_SBX_RESULT, id, 3);
	ipc_put_u64(w, 0);
	ipc_put_str(w, "");
}

static uint32_t
tools_cap(uint32_t asked, uint32_t max)
{
	return asked == 0 || asked > max ? max : asked;
}

static void
tools_read(struct tools *t, uint64_t id, const struct ipc_msg *m)
{
	struct ipc_sbx_read r;
	struct ws_buf b = { 0 };
	struct ipc_wbuf w;
	uint64_t size, limit;
	char err[IPC_ERRMSG_MAX];
	int rc;

	(void)ipc_dec_sbx_read(m->body, &r);
	limit = r.limit;
	if (limit > t->hello.file_max)
		limit = t->hello.file_max;
	if (limit > IPC_MAX_FRAME_DEFAULT - SBX_FRAME_SLACK)
		limit = IPC_MAX_FRAME_DEFAULT - SBX_FRAME_SLACK;
	if ((rc = ws_read(&t->ws, r.path, r.offset, limit, &b, &size, err, sizeof(err))) != 0) {
		tools_reply_error(t, id, rc, err);
		return;
	}
	tools_ok_begin(&w, id);
	ipc_put_array(&w, 2);
	ipc_put_bin(&w, b.data != NULL ? b.data : (const uint8_t *)"", b.len);
	ipc_put_u64(&w, size);
	ws_buf_free(&b);
	tools_send(t, &w);
}

static void
tools_write(struct tools *t, uint64_t id, const struct ipc_msg *m)
{
	struct ipc_sbx_write r;
	struct ipc_wbuf w;
	char err[IPC_ERRMSG_MAX];
	int rc;

	(void)ipc_dec_sbx_write(m->body, &r);
	if ((rc = ws_write(&t->ws, r.path, r.data, r.len, r.mkdirs, err, sizeof(err))) != 0) {
		tools_reply_error(t, id, rc, err);
		return;
	}
	tools_ok_begin(&w, id);
	ipc_put_nil(&w);
	tools_send(t, &w);
}

static void
tools_edit(struct tools *t, uint64_t id, const struct ipc_msg *m)
{
	struct ipc_sbx_edit r;
	struct ipc_wbuf w;
	char err[IPC_ERRMSG_MAX];
	uint32_t n = 0;
	int rc;

	(void)ipc_dec_sbx_edit(m->body, &r);
	if ((rc = ws_edit(&t->ws, r.path, r.old, r.oldlen, r.new, r.newlen, r.count, &n, err,
		 sizeof(err))) != 0) {
		tools_reply_error(t, id, rc, err);
		return;
	}
	tools_ok_begin(&w, id);
	ipc_put_array(&w, 1);
	ipc_put_u64(&w, n);
	tools_send(t, &w);
}

/* The reply of list and glob: the error of rc != 0, or data [truncated,
 * [[name, type, size]...]].  Frees e either way. */
static void
tools_reply_entries(struct tools *t, uint64_t id, int rc, struct ws_entries *e, const char *err)
{
	struct ipc_wbuf w;
	size_t i;

	if (rc != 0) {
		ws_entries_free(e);
		tools_reply_error(t, id, rc, err);
		return;
	}
	tools_ok_begin(&w, id);
	ipc_put_array(&w, 2);
	ipc_put_bool(&w, e->truncated);
	ipc_put_array(&w, (uint32_t)e->n);
	for (i = 0; i < e->n; i++) {
		ipc_put_array(&w, 3);
		ipc_put_str(&w, e->v[i].name);
		ipc_put_str(&w, ws_type_name(e->v[i].type));
		ipc_put_u64(&w, e->v[i].size);
	}
	ws_entries_free(e);
	tools_send(t, &w);
}

static void
tools_list(struct tools *t, uint64_t id, const struct ipc_msg *m)
{
	struct ipc_sbx_list r;
	struct ws_entries e = { 0 };
	char err[IPC_ERRMSG_MAX];
	int rc;

	(void)ipc_dec_sbx_list(m->body, &r);
	rc = ws_list(&t->ws, r.path, tools_cap(r.max, SBX_LIST_MAX), &e, err, sizeof(err));
	tools_reply_entries(t, id, rc, &e, err);
}

static void
tools_glob(struct tools *t, uint64_t id, const struct ipc_msg *m)
{
	struct ipc_sbx_glob r;
	struct ws_entries e = { 0 };
	char err[IPC_ERRMSG_MAX];
	int rc;

	(void)ipc_dec_sbx_glob(m->body, &r);
	rc = ws_glob(&t->ws, r.pattern, r.base, tools_cap(r.max, SBX_LIST_MAX), &e, err,
	    sizeof(err));
	tools_reply_entries(t, id, rc, &e, err);
}

static void
tools_grep(struct tools *t, uint64_t id, const struct ipc_msg *m)
{
	struct ipc_sbx_grep r;
	struct ws_matches mt = { 0 };
	struct ipc_wbuf w;
	char err[IPC_ERRMSG_MAX];
	size_t i;
	int rc;

	(void)ipc_dec_sbx_grep(m->body, &r);
	if ((rc = ws_grep(&t->ws, r.regex, r.path, r.include, r.icase,
		 tools_cap(r.max, SBX_GREP_MAX), &mt, err, sizeof(err))) != 0) {
		tools_reply_error(t, id, rc, err);
		return;
	}
	tools_ok_begin(&w, id);
	ipc_put_array(&w, 2);
	ipc_put_bool(&w, mt.truncated);
	ipc_put_array(&w, (uint32_t)mt.n);
	for (i = 0; i < mt.n; i++) {
		ipc_put_array(&w, 3);
		ipc_put_str(&w, mt.v[i].file);
		ipc_put_u64(&w, mt.v[i].line);
		ipc_put_str(&w, mt.v[i].text);
	}
	ws_matches_free(&mt);
	tools_send(t, &w);
}

static void
tools_stat(struct tools *t, uint64_t id, const struct ipc_msg *m)
{
	char path[IPC_SBX_PATH_MAX + 1], err[IPC_ERRMSG_MAX];
	struct ws_stat st;
	struct ipc_wbuf w;
	int rc;

	(void)ipc_dec_sbx_stat(m->body, path, sizeof(path));
	if ((rc = ws_stat(&t->ws, path, &st, err, sizeof(err))) != 0) {
		tools_reply_error(t, id, rc, err);
		return;
	}
	tools_ok_begin(&w, id);
	ipc_put_array(&w, 5);
	ipc_put_str(&w, ws_type_name(st.type));
	ipc_put_u64(&w, st.size);
	ipc_put_u64(&w, st.mode);
	ipc_put_i64(&w, st.mtime);
	ipc_put_u64(&w, st.nlink);
	tools_send(t, &w);
}

/*
 * An artifact: the bytes as SBX_OUTPUT frames on stream 0, then the size
 * and sha256.  The file may change while it is read (a command may still
 * run); the cap holds on what is actually read, and the digest is of
 * exactly the bytes sent.
 */
static void
tools_artifact(struct tools *t, uint64_t id, const struct ipc_msg *m)
{
	struct ipc_sbx_artifact r;
	crypto_hash_sha256_state h;
	unsigned char digest[crypto_hash_sha256_BYTES];
	uint8_t *buf;
	uint64_t size, sent = 0, cap;
	struct ipc_wbuf w;
	char err[IPC_ERRMSG_MAX];
	ssize_t n;
	int fd, rc;

	(void)ipc_dec_sbx_artifact(m->body, &r);
	cap = r.cap < t->hello.artifact_max ? r.cap : t->hello.artifact_max;
	if ((rc = ws_artifact_open(&t->ws, r.name, cap, &fd, &size, err, sizeof(err))) != 0) {
		tools_reply_error(t, id, rc, err);
		return;
	}
	if ((buf = malloc(IPC_CHUNK_SIZE)) == NULL)
		fatal("malloc");
	crypto_hash_sha256_init(&h);
	while ((n = read(fd, buf, IPC_CHUNK_SIZE)) > 0 && sent + (uint64_t)n <= cap) {
		crypto_hash_sha256_update(&h, buf, (unsigned long long)n);
		ipc_wbuf_begin(&w, IMSG_SBX_OUTPUT, id, 2);
		ipc_put_u64(&w, 0);
		ipc_put_bin(&w, buf, (size_t)n);
		tools_send(t, &w);
		sent += (uint64_t)n;
	}
	rc = n < 0 ? errno : n > 0 ? EFBIG : sent == 0 ? ENODATA : 0;
	free(buf);
	close(fd);
	if (rc != 0) {
		snprintf(err, sizeof(err), "%s: %s while reading", r.name,
		    rc == EFBIG ? "grew over the cap" : rc == ENODATA ? "became empty" : strerror(rc));
		tools_reply_error(t, id, rc, err);
		return;
	}
	crypto_hash_sha256_final(&h, digest);
	tools_ok_begin(&w, id);
	ipc_put_array(&w, 2);
	ipc_put_u64(&w, sent);
	ipc_put_bin(&w, digest, sizeof(digest));
	tools_send(t, &w);
}

static void
tools_on_msg(struct ipc_chan *ch, struct ipc_msg *m, void *arg)
{
	struct tools *t = arg;
	struct ipc_sbx_exec ex;

	/* The catalog validated every body: the decoders below cannot fail. */
	switch (m->type) {
	case IMSG_SBX_READ:
		tools_read(t, m->id, m);
		break;
	case IMSG_SBX_WRITE:
		tools_write(t, m->id, m);
		break;
	case IMSG_SBX_EDIT:
		tools_edit(t, m->id, m);
		break;
	case IMSG_SBX_LIST:
		tools_list(t, m->id, m);
		break;
	case IMSG_SBX_GLOB:
		tools_glob(t, m->id, m);
		break;
	case IMSG_SBX_GREP:
		tools_grep(t, m->id, m);
		break;
	case IMSG_SBX_STAT:
		tools_stat(t, m->id, m);
		break;
	case IMSG_SBX_EXEC:
		(void)ipc_dec_sbx_exec(m->body, &ex);
		exec_start(t, m->id, &ex);
		break;
	case IMSG_SBX_KILL:
		exec_kill(t, m->id);
		break;
	case IMSG_SBX_ARTIFACT:
		tools_artifact(t, m->id, m);
		break;
	default:
		fatalx("driver sent %s, which a sandbox does not serve", ipc_msg_name(m->type));
	}
}

static void
tools_on_err(struct ipc_chan *ch, const char *reason, void *arg)
{
	if (strcmp(reason, "closed") == 0) {
		log_debug("driver hung up; ending the sandbox");
		exit(0);
	}
	fatalx("driver channel: %s", reason);
}

static void
tools_sigchld(evutil_socket_t sig, short what, void *arg)
{
	exec_reap(arg);
}

static void
tools_hello(struct tools *t)
{
	struct ipc_msg m;
	const char *err;

	if (ipc_read_frame(SBX_FD, ROLE_SANDBOX, ROLE_SUPERVISOR, IPC_MAX_FRAME_DEFAULT,
		SBX_HELLO_TIMEOUT_MS, &m, &err) == -1)
		fatalx("no hello from the supervisor: %s", err);
	if (m.type != IMSG_SBX_HELLO || ipc_dec_sbx_hello(m.body, &t->hello) == -1)
		fatalx("first message is not a sandbox hello");
	ipc_msg_free(&m);
	if (t->hello.proto != IPC_PROTO_VERSION)
		fatalx("protocol version mismatch: supervisor %u, sandbox %u", t->hello.proto,
		    IPC_PROTO_VERSION);
	log_setverbose((int)t->hello.verbose);
}

static void
tools_ready(struct tools *t)
{
	struct ipc_wbuf w;

	ipc_wbuf_begin(&w, IMSG_SBX_READY, 0, 2);
	ipc_put_u64(&w, IPC_PROTO_VERSION);
	ipc_put_u64(&w, (uint64_t)getpid());
	tools_send(t, &w);
}

void
sandbox_main(void)
{
	struct tools *t = &tools;
	struct event *ev;
	char err[256];

	log_procinit("sandbox");
	privsep_nodump();
	privsep_lsan_off();
	tools_hello(t);
	if (sodium_init() == -1)
		fatalx("libsodium initialisation failed");
	if (ws_open(&t->ws, "/workspace", t->hello.access == 1, t->hello.file_max, err,
		sizeof(err)) != 0)
		fatalx("workspace: %s", err);
	if ((t->base = event_base_new()) == NULL)
		fatalx("event_base_new");
	signal(SIGPIPE, SIG_IGN);
	if ((ev = evsignal_new(t->base, SIGCHLD, tools_sigchld, t)) == NULL ||
	    event_add(ev, NULL) == -1)
		fatalx("signal set-up");
	/* set by the supervisor's sandbox builder, whose environment this is */
	t->network = getenv("AGRIPPA_EGRESS") != NULL;
	privsep_seccomp_sandbox(t->network);
	t->chan = ipc_chan_new(t->base, SBX_FD, ROLE_SANDBOX, ROLE_RUNNER, IPC_MAX_FRAME_DEFAULT,
	    tools_on_msg, tools_on_err, t);
	if (t->chan == NULL)
		fatalx("cannot create the driver channel");
	tools_ready(t);
	log_debug("serving %s (%s workspace)", t->hello.id,
	    t->hello.access == 1 ? "read-only" : "read-write");
	event_base_dispatch(t->base);
	exit(0);
}
