/*
 * sbxcall — drive a sandbox's tool server from the security tests, the way
 * a runner does: ask the daemon for a sandbox over the control socket, then
 * send each request and print one line per reply.
 *
 *   sbxcall CTLSOCK [-r] [-w dir] OP ARG... [:: OP ARG...]...
 *
 * OPs: read PATH | write PATH DATA | mkwrite PATH DATA (creating parents) |
 *      edit PATH OLD NEW [COUNT] | list PATH | glob PATTERN [BASE] |
 *      grep REGEX [PATH] | stat PATH | artifact NAME [CAP] | sh COMMAND [CWD] |
 *      busykill COMMAND (runs COMMAND, tries a second command while it runs,
 *      then kills the first with SBX_KILL)
 *
 * Each line is "OP ARG1: ok ..." or "OP ARG1: error E (name): message",
 * where E is the errno value the sandbox answered.  Exit status 0 when the
 * sandbox answered everything, 1 on a protocol surprise, 2 on usage.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ipc/ipc.h"
#include "ipc/ipc_msg.h"

#define SBXCALL_TIMEOUT_MS 60000

static int sbx = -1;
static uint64_t next_id = 100;

__attribute__((noreturn)) static void
usage(void)
{
	fprintf(stderr, "usage: sbxcall CTLSOCK [-r] [-w dir] OP ARG... [:: OP ARG...]...\n");
	exit(2);
}

__attribute__((noreturn)) static void
die(const char *what, const char *err)
{
	printf("sbxcall: %s: %s\n", what, err ? err : "unexpected message");
	exit(1);
}

static void
send_frame(struct ipc_wbuf *w)
{
	if (ipc_wbuf_finish(w, IPC_MAX_FRAME_DEFAULT) == -1 || ipc_write_frame(sbx, w, -1) == -1)
		die("send", strerror(errno));
	ipc_wbuf_free(w);
}

static void
recv_frame(struct ipc_msg *m)
{
	const char *err = NULL;

	if (ipc_read_frame(sbx, ROLE_CTL, ROLE_SANDBOX, IPC_MAX_FRAME_DEFAULT, SBXCALL_TIMEOUT_MS,
		m, &err) == -1)
		die("receive", err);
}

static void
print_error(const char *label, uint32_t code, const char *msg, size_t len)
{
	printf("%s: error %u (%s): %.*s\n", label, code, strerrorname_np((int)code) ?: "?",
	    (int)len, msg);
}

/* Print a msgpack value compactly (strings and bins as text). */
static void
print_value(const msgpack_object *o)
{
	uint32_t i;

	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		printf("nil");
		break;
	case MSGPACK_OBJECT_BOOLEAN:
		printf("%s", o->via.boolean ? "true" : "false");
		break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		printf("%llu", (unsigned long long)o->via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		printf("%lld", (long long)o->via.i64);
		break;
	case MSGPACK_OBJECT_STR:
		printf("\"%.*s\"", (int)o->via.str.size, o->via.str.ptr);
		break;
	case MSGPACK_OBJECT_BIN: /* text as <text>, anything else (a digest) as hex */
		for (i = 0; i < o->via.bin.size; i++)
			if (!isprint((unsigned char)o->via.bin.ptr[i]) && o->via.bin.ptr[i] != '\n')
				break;
		if (i == o->via.bin.size) {
			printf("<%.*s>", (int)o->via.bin.size, o->via.bin.ptr);
			break;
		}
		for (i = 0; i < o->via.bin.size; i++)
			printf("%02x", (unsigned char)o->via.bin.ptr[i]);
		break;
	case MSGPACK_OBJECT_ARRAY:
		printf("[");
		for (i = 0; i < o->via.array.size; i++) {
			printf(i ? " " : "");
			print_value(&o->via.array.ptr[i]);
		}
		printf("]");
		break;
	default:
		printf("?");
	}
}

/* Wait for the terminal reply of id, printing SBX_OUTPUT data on the way. */
static void
await(const char *label, uint64_t id, int is_exec)
{
	struct ipc_sbx_result r;
	struct ipc_sbx_exit x;
	struct ipc_sbx_output o;
	struct ipc_msg m;
	size_t out = 0;

	for (;;) {
		recv_frame(&m);
		if (m.id != id)
			die(label, "reply with another id");
		if (m.type == IMSG_SBX_OUTPUT && ipc_dec_sbx_output(m.body, &o) == 0) {
			out += o.len;
			if (is_exec)
				fwrite(o.data, 1, o.len, stdout);
		} else if (is_exec && m.type == IMSG_SBX_EXIT && ipc_dec_sbx_exit(m.body, &x) == 0) {
			if (x.code != 0)
				print_error(label, x.code, x.error, x.errlen);
			else
				printf("%s: ok status=%lld signal=%u timed_out=%d\n", label,
				    (long long)x.status, x.signal, x.timed_out);
			break;
		} else if (!is_exec && m.type == IMSG_SBX_RESULT &&
		    ipc_dec_sbx_result(m.body, &r) == 0) {
			if (r.code != 0) {
				print_error(label, r.code, r.error, r.errlen);
			} else {
				printf("%s: ok ", label);
				if (out > 0)
					printf("streamed=%zu ", out);
				print_value(r.data);
				printf("\n");
			}
			break;
		} else {
			die(label, ipc_msg_name(m.type));
		}
		ipc_msg_free(&m);
	}
	ipc_msg_free(&m);
}

static uint32_t
num(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v > UINT32_MAX)
		usage();
	return (uint32_t)v;
}

static void
put_exec(struct ipc_wbuf *w, uint64_t id, const char *cmd, const char *cwd)
{
	ipc_wbuf_begin(w, IMSG_SBX_EXEC, id, 4);
	ipc_put_bool(w, 1);
	ipc_put_array(w, 1);
	ipc_put_str(w, cmd);
	ipc_put_str(w, cwd);
	ipc_put_u64(w, 0);
}

/* A second exec while one runs is refused (EBUSY); SBX_KILL ends the first. */
static void
busykill(const char *label, const char *cmd)
{
	uint64_t first = next_id++, second = next_id++;
	struct ipc_wbuf w;
	struct ipc_sbx_exit x;
	struct ipc_msg m;
	uint32_t busy = 0;

	put_exec(&w, first, cmd, "");
	send_frame(&w);
	put_exec(&w, second, "true", "");
	send_frame(&w);
	recv_frame(&m);
	if (m.type != IMSG_SBX_EXIT || m.id != second || ipc_dec_sbx_exit(m.body, &x) == -1)
		die(label, "no answer to the second command");
	busy = x.code;
	ipc_msg_free(&m);
	ipc_wbuf_begin(&w, IMSG_SBX_KILL, first, 0);
	send_frame(&w);
	recv_frame(&m);
	if (m.type != IMSG_SBX_EXIT || m.id != first || ipc_dec_sbx_exit(m.body, &x) == -1)
		die(label, "no exit of the first command");
	printf("%s: second=%s killed signal=%u status=%lld error=%.*s\n", label,
	    strerrorname_np((int)busy) ?: "0", x.signal, (long long)x.status, (int)x.errlen,
	    x.error);
	ipc_msg_free(&m);
}

/* One op of argc words; returns nothing, prints its line. */
static void
run_op(int argc, char **argv)
{
	const char *op = argv[0], *a1 = argc > 1 ? argv[1] : "";
	char label[256];
	struct ipc_wbuf w;
	uint64_t id = next_id++;
	int is_exec = 0;

	snprintf(label, sizeof(label), "%s %s", op, a1);
	if (strcmp(op, "read") == 0 && argc == 2) {
		ipc_wbuf_begin(&w, IMSG_SBX_READ, id, 3);
		ipc_put_str(&w, a1);
		ipc_put_u64(&w, 0);
		ipc_put_u64(&w, 1 << 20);
	} else if ((strcmp(op, "write") == 0 || strcmp(op, "mkwrite") == 0) && argc == 3) {
		ipc_wbuf_begin(&w, IMSG_SBX_WRITE, id, 3);
		ipc_put_str(&w, a1);
		ipc_put_bin(&w, argv[2], strlen(argv[2]));
		ipc_put_bool(&w, op[0] == 'm');
	} else if (strcmp(op, "edit") == 0 && (argc == 4 || argc == 5)) {
		ipc_wbuf_begin(&w, IMSG_SBX_EDIT, id, 4);
		ipc_put_str(&w, a1);
		ipc_put_str(&w, argv[2]);
		ipc_put_str(&w, argv[3]);
		ipc_put_u64(&w, argc == 5 ? num(argv[4]) : 0);
	} else if (strcmp(op, "list") == 0 && argc == 2) {
		ipc_wbuf_begin(&w, IMSG_SBX_LIST, id, 2);
		ipc_put_str(&w, a1);
		ipc_put_u64(&w, 0);
	} else if (strcmp(op, "glob") == 0 && (argc == 2 || argc == 3)) {
		ipc_wbuf_begin(&w, IMSG_SBX_GLOB, id, 3);
		ipc_put_str(&w, a1);
		ipc_put_str(&w, argc == 3 ? argv[2] : "");
		ipc_put_u64(&w, 0);
	} else if (strcmp(op, "grep") == 0 && (argc == 2 || argc == 3)) {
		ipc_wbuf_begin(&w, IMSG_SBX_GREP, id, 5);
		ipc_put_str(&w, a1);
		ipc_put_str(&w, argc == 3 ? argv[2] : "");
		ipc_put_str(&w, "");
		ipc_put_bool(&w, 0);
		ipc_put_u64(&w, 0);
	} else if (strcmp(op, "stat") == 0 && argc == 2) {
		ipc_wbuf_begin(&w, IMSG_SBX_STAT, id, 1);
		ipc_put_str(&w, a1);
	} else if (strcmp(op, "artifact") == 0 && (argc == 2 || argc == 3)) {
		ipc_wbuf_begin(&w, IMSG_SBX_ARTIFACT, id, 4);
		ipc_put_str(&w, "key");
		ipc_put_str(&w, "text");
		ipc_put_str(&w, a1);
		ipc_put_u64(&w, argc == 3 ? num(argv[2]) : UINT32_MAX);
	} else if (strcmp(op, "sh") == 0 && (argc == 2 || argc == 3)) {
		put_exec(&w, id, a1, argc == 3 ? argv[2] : "");
		is_exec = 1;
	} else if (strcmp(op, "busykill") == 0 && argc == 2) {
		busykill(label, a1);
		return;
	} else {
		usage();
	}
	send_frame(&w);
	await(label, id, is_exec);
}

static int
open_sandbox(const char *sock, int readonly, const char *ws)
{
	struct ipc_ctl_reply rep;
	struct ipc_wbuf w;
	struct ipc_msg m;
	const char *err = NULL;
	int ctl = ctl_connect(sock);

	ipc_wbuf_begin(&w, IMSG_CTL_REQUEST, 1, 2);
	ipc_put_str(&w, "sandbox");
	ipc_put_array(&w, 2);
	ipc_put_str(&w, readonly ? "ro" : "rw");
	ipc_put_str(&w, ws);
	if (ipc_wbuf_finish(&w, CTL_MAX_FRAME) == -1 || ipc_write_frame(ctl, &w, -1) == -1)
		die("control request", strerror(errno));
	ipc_wbuf_free(&w);
	if (ipc_read_frame(ctl, ROLE_CTL, ROLE_SUPERVISOR, CTL_MAX_FRAME, CTL_TIMEOUT_MS, &m,
		&err) == -1)
		die("control reply", err);
	if (m.type == IMSG_CTL_REPLY && ipc_dec_ctl_reply(m.body, &rep) == 0) {
		printf("sandbox: refused: %.*s\n", (int)rep.msglen, rep.message);
		exit(1);
	}
	if (m.type != IMSG_CTL_SANDBOX || m.fd < 0)
		die("control reply", NULL);
	sbx = m.fd;
	m.fd = -1;
	ipc_msg_free(&m);
	recv_frame(&m);
	if (m.type != IMSG_SBX_READY)
		die("ready", ipc_msg_name(m.type));
	ipc_msg_free(&m);
	return ctl;
}

int
main(int argc, char **argv)
{
	const char *sock, *ws = "";
	char real[PATH_MAX];
	int readonly = 0, i, start, ctl;

	if (argc < 3)
		usage();
	sock = argv[1];
	for (i = 2; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "-r") == 0)
			readonly = 1;
		else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) {
			if (realpath(argv[++i], real) == NULL)
				die(argv[i], strerror(errno));
			ws = real;
		} else
			usage();
	}
	if (i >= argc)
		usage();
	ctl = open_sandbox(sock, readonly, ws);
	for (start = i; i <= argc; i++) {
		if (i == argc || strcmp(argv[i], "::") == 0) {
			if (i == start)
				usage();
			run_op(i - start, argv + start);
			start = i + 1;
		}
	}
	close(sbx);
	close(ctl);
	return 0;
}
